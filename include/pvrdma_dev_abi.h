/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * PVRDMA device ABI: the contract between the PCI device (hw/pvrdma), the
 * guest kernel driver (guest-driver/) and the tests.
 *
 * Facts follow the VMware PVRDMA device, interface version 20, as consumed
 * by Linux's vmw_pvrdma driver (described in docs/abi.md, cited as
 * "spec §N").  Everything the user-space provider shares with the kernel
 * (WQE, CQE, SGE and AV layouts, doorbell bits, udata) is the system's
 * <rdma/vmw_pvrdma-abi.h>; it is included here, never redefined.
 *
 * Rules for this file:
 *  - fixed-width fields, all little-endian unless marked BE;
 *  - reserved fields are must-be-zero (MBZ) when written by the guest;
 *  - every structure has a compile-time size check and the offsets the
 *    spec tables give are checked too;
 *  - no function prototypes.
 */
#ifndef PVRDMA_DEV_ABI_H
#define PVRDMA_DEV_ABI_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/stddef.h>
#else
#include <stddef.h>
#include <stdint.h>
#endif
#include <rdma/vmw_pvrdma-abi.h>

#define PVRDMA_ABI_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#define PVRDMA_ABI_SIZE(type, size) \
    PVRDMA_ABI_STATIC_ASSERT(sizeof(type) == (size), #type " size")
#define PVRDMA_ABI_OFF(type, field, off) \
    PVRDMA_ABI_STATIC_ASSERT(offsetof(type, field) == (off), \
                             #type "." #field " offset")

/* ---- spec §1: PCI identity, BARs, interrupts ---------------------------- */

#define PVRDMA_PCI_VENDOR_ID            0x15AD
#define PVRDMA_PCI_DEVICE_ID            0x0820
#define PVRDMA_PCI_CLASS                0x0280  /* network controller, other */
#define PVRDMA_VMXNET3_DEVICE_ID        0x07B0  /* optional partner at fn 0 */

#define PVRDMA_BAR_MSIX                 0       /* MSI-X table and PBA */
#define PVRDMA_BAR_REG                  1       /* register file */
#define PVRDMA_BAR_UAR                  2       /* doorbell pages */

#define PVRDMA_MSIX_BAR_SIZE            0x4000
#define PVRDMA_MSIX_TABLE_OFFSET        0x0000
#define PVRDMA_MSIX_PBA_OFFSET          0x2000
#define PVRDMA_REG_BAR_SIZE             0x100
#define PVRDMA_PAGE_SHIFT               12
#define PVRDMA_PAGE_SIZE                (1u << PVRDMA_PAGE_SHIFT)
#define PVRDMA_UAR_PAGE_SIZE            PVRDMA_PAGE_SIZE

/* MSI-X vectors and the matching ICR cause bits. */
#define PVRDMA_VECTOR_RESPONSE          0
#define PVRDMA_VECTOR_ASYNC             1
#define PVRDMA_VECTOR_CQ                2
#define PVRDMA_NUM_VECTORS              3
#define PVRDMA_ICR_RESPONSE             (1u << PVRDMA_VECTOR_RESPONSE)
#define PVRDMA_ICR_ASYNC                (1u << PVRDMA_VECTOR_ASYNC)
#define PVRDMA_ICR_CQ                   (1u << PVRDMA_VECTOR_CQ)

/* ---- spec §2: register file (BAR1), 32-bit accesses only ---------------- */

#define PVRDMA_REG_VERSION              0x00    /* R: interface version */
#define PVRDMA_REG_DSRLOW               0x04    /* W: DSR address [31:0] */
#define PVRDMA_REG_DSRHIGH              0x08    /* W: [63:32], loads the DSR */
#define PVRDMA_REG_CTL                  0x0C    /* W: PVRDMA_DEVICE_CTL_* */
#define PVRDMA_REG_REQUEST              0x10    /* W: 0 = run command slot */
#define PVRDMA_REG_ERR                  0x14    /* R: status of last op */
#define PVRDMA_REG_ICR                  0x18    /* R: interrupt cause */
#define PVRDMA_REG_IMR                  0x1C    /* RW: interrupt mask */
#define PVRDMA_REG_MACL                 0x20    /* RW: MAC [31:0] */
#define PVRDMA_REG_MACH                 0x24    /* RW: MAC [47:32] */
#define PVRDMA_REG_COUNT                10

#define PVRDMA_DEVICE_CTL_ACTIVATE      0
#define PVRDMA_DEVICE_CTL_UNQUIESCE     1
#define PVRDMA_DEVICE_CTL_RESET         2

/* Interface versions (spec §5.5). */
#define PVRDMA_VERSION_ROCEV1           17
#define PVRDMA_VERSION_ROCEV2           18
#define PVRDMA_VERSION_PPN64            19
#define PVRDMA_VERSION_QPHANDLE         20
#define PVRDMA_VERSION                  PVRDMA_VERSION_QPHANDLE

/* ---- spec §4: page directories ------------------------------------------ */

#define PVRDMA_PDIR_ENTRIES             512     /* u64 entries per page */
#define PVRDMA_PDIR_TABLE_SHIFT         9
#define PVRDMA_PDIR_TABLE_MASK          0x1FF
#define PVRDMA_PDIR_SLOT_MASK           0x1FF
#define PVRDMA_PDIR_MAX_PAGES           (PVRDMA_PDIR_ENTRIES * \
                                         PVRDMA_PDIR_ENTRIES)
#define PVRDMA_MAX_FAST_REG_PAGES       128

/* ---- spec §6: rings ------------------------------------------------------ */

/* One ring's indices; values live in [0, 2N), bit log2(N) is the wrap bit. */
struct pvrdma_ring {
    uint32_t prod_tail;         /* written only by the producer */
    uint32_t cons_head;         /* written only by the consumer */
};
PVRDMA_ABI_SIZE(struct pvrdma_ring, 8);

/* Page 0 of every ring-backed object. */
struct pvrdma_ring_state {
    struct pvrdma_ring tx;      /* QP send queue */
    struct pvrdma_ring rx;      /* QP receive queue, CQ, SRQ, DSR rings */
};
PVRDMA_ABI_SIZE(struct pvrdma_ring_state, 16);

#define PVRDMA_RING_STATE_TX_OFFSET     0
#define PVRDMA_RING_STATE_RX_OFFSET     8
/* PVRDMA_EX_CAP_RQ_DB_HINT: a QP's receive doorbell hint (LE u32, written
 * by the device only): PVRDMA_RQ_DB_SKIP, or 0 (ring every doorbell). */
#define PVRDMA_RING_STATE_RQ_DB_HINT_OFFSET 16
#define PVRDMA_RQ_DB_SKIP               1u
/* PVRDMA_EX_CAP_SQ_DB_HINT: a QP's send doorbell hint (LE u32, written by
 * the device only): PVRDMA_SQ_DB_SKIP, or 0 (ring every doorbell). */
#define PVRDMA_RING_STATE_SQ_DB_HINT_OFFSET 20
#define PVRDMA_SQ_DB_SKIP               1u
/* Written by our guest driver, not the device: when the device leaves
 * (hot-unplug, driver unbind) with user objects open, each user CQ's
 * rx.prod_tail and each user QP's and SRQ's device-side indices (tx and
 * rx cons_head) get this value once the device has destroyed the object.
 * It is outside [0, 2N) for every ring, so any provider's next poll or
 * post finds the ring invalid and fails instead of waiting for a device
 * that is gone; ours says the device was removed. */
#define PVRDMA_RING_DEAD                0xffffffffu

/* Async event ring element (spec §6.3). */
struct pvrdma_eqe {
    uint32_t type;              /* PVRDMA_EQE_TYPE_* */
    uint32_t info;              /* object handle or port number */
};
PVRDMA_ABI_SIZE(struct pvrdma_eqe, 8);

enum pvrdma_eqe_type {
    PVRDMA_EQE_TYPE_CQ_ERR = 0,
    PVRDMA_EQE_TYPE_QP_FATAL = 1,
    PVRDMA_EQE_TYPE_QP_REQ_ERR = 2,
    PVRDMA_EQE_TYPE_QP_ACCESS_ERR = 3,
    PVRDMA_EQE_TYPE_COMM_EST = 4,
    PVRDMA_EQE_TYPE_SQ_DRAINED = 5,
    PVRDMA_EQE_TYPE_PATH_MIG = 6,
    PVRDMA_EQE_TYPE_PATH_MIG_ERR = 7,
    PVRDMA_EQE_TYPE_DEVICE_FATAL = 8,
    PVRDMA_EQE_TYPE_PORT_ACTIVE = 9,
    PVRDMA_EQE_TYPE_PORT_ERR = 10,
    PVRDMA_EQE_TYPE_LID_CHANGE = 11,
    PVRDMA_EQE_TYPE_PKEY_CHANGE = 12,
    PVRDMA_EQE_TYPE_SM_CHANGE = 13,
    PVRDMA_EQE_TYPE_SRQ_ERR = 14,
    PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED = 15,
    PVRDMA_EQE_TYPE_QP_LAST_WQE_REACHED = 16,
    PVRDMA_EQE_TYPE_CLIENT_REREGISTER = 17,
    PVRDMA_EQE_TYPE_GID_CHANGE = 18,
};

/* CQ notification ring element (spec §6.4). */
struct pvrdma_cqne {
    uint32_t info;              /* CQ handle */
};
PVRDMA_ABI_SIZE(struct pvrdma_cqne, 4);

/* ---- spec §3: device shared region -------------------------------------- */

#define PVRDMA_GOS_BITS_MASK            0x00000003u
#define PVRDMA_GOS_BITS_SHIFT           0
#define PVRDMA_GOS_TYPE_MASK            0x0000003Cu
#define PVRDMA_GOS_TYPE_SHIFT           2
#define PVRDMA_GOS_VER_MASK             0x003FFFC0u
#define PVRDMA_GOS_VER_SHIFT            6
#define PVRDMA_GOS_MISC_MASK            0xFFC00000u
#define PVRDMA_GOS_MISC_SHIFT           22
#define PVRDMA_GOS_BITS_64              2
#define PVRDMA_GOS_TYPE_LINUX           1

struct pvrdma_gos_info {
    uint32_t word;              /* PVRDMA_GOS_* fields, informational */
    uint32_t pad;               /* MBZ */
};
PVRDMA_ABI_SIZE(struct pvrdma_gos_info, 8);

/* Location of a device ring (async or CQ notification). */
struct pvrdma_ring_page_info {
    uint32_t num_pages;         /* data pages incl. the ring-state page */
    uint32_t reserved;          /* MBZ */
    uint64_t pdir_dma;          /* bus address of the page directory */
};
PVRDMA_ABI_SIZE(struct pvrdma_ring_page_info, 16);

/* Device mode (caps.mode). */
#define PVRDMA_DEVICE_MODE_ROCE         0
#define PVRDMA_DEVICE_MODE_IWARP        1
#define PVRDMA_DEVICE_MODE_IB           2

/* caps.atomic_ops */
#define PVRDMA_ATOMIC_OP_COMP_SWAP      (1u << 0)
#define PVRDMA_ATOMIC_OP_FETCH_ADD      (1u << 1)
#define PVRDMA_ATOMIC_OP_MASK_COMP_SWAP (1u << 2)
#define PVRDMA_ATOMIC_OP_MASK_FETCH_ADD (1u << 3)

/* caps.bmme_flags */
#define PVRDMA_BMME_FLAG_LOCAL_INV      (1u << 0)
#define PVRDMA_BMME_FLAG_REMOTE_INV     (1u << 1)
#define PVRDMA_BMME_FLAG_FAST_REG_WR    (1u << 2)

/* caps.gid_types and CREATE_BIND gid_type: exactly one bit is advertised. */
#define PVRDMA_GID_TYPE_FLAG_ROCE_V1    (1u << 0)
#define PVRDMA_GID_TYPE_FLAG_ROCE_V2    (1u << 1)

/*
 * Project extensions (docs/abi.md, "Extensions").  The VMware device
 * leaves caps.ex_comp_mask zero and the stock vmw_pvrdma driver never
 * reads it; our device sets these bits and our driver passes them on to
 * our provider in the reserved word of the ALLOC_UCONTEXT response, which
 * the stock driver leaves zero and the stock provider never reads.
 */
/* Completions may wait until a CQ_POLL doorbell takes them in (a fabric
 * link to another process): a poller should ring it on an empty poll. */
#define PVRDMA_EX_CAP_CQ_POLL_HINT      (1u << 31)
/* RESIZE_CQ takes the new ring (struct pvrdma_cmd_resize_cq_ex) and moves
 * the CQEs not yet polled into it. */
#define PVRDMA_EX_CAP_RESIZE_CQ         (1u << 30)
/* CREATE_QP takes qp_type UC (PVRDMA_QPT_UC). */
#define PVRDMA_EX_CAP_UC                (1u << 29)
/* Memory windows: CREATE_MR flags PVRDMA_MR_FLAG_MW_TYPE1/2, send opcode
 * PVRDMA_WR_BIND_MW (struct pvrdma_ex_bind_mw), LOCAL_INV of type 2. */
#define PVRDMA_EX_CAP_MW                (1u << 28)
/* CREATE_CQ reserved[0] may ask PVRDMA_CQ_FLAG_TIMESTAMP: the device then
 * writes its clock (ns, low 48 bits) into each CQE's reserved2. */
#define PVRDMA_EX_CAP_CQE_TIMESTAMP     (1u << 27)
/* Receive doorbells on demand: the device keeps a hint word in each QP's
 * ring-state page (PVRDMA_RING_STATE_RQ_DB_HINT_OFFSET); while it reads
 * PVRDMA_RQ_DB_SKIP the device takes receive WQEs from the ring when
 * messages arrive, and a receive doorbell may be left out. */
#define PVRDMA_EX_CAP_RQ_DB_HINT        (1u << 26)
/* Command PVRDMA_CMD_MODIFY_MR (struct pvrdma_cmd_modify_mr): a user MR
 * changes its access or PD in place, keeping its keys. */
#define PVRDMA_EX_CAP_MODIFY_MR         (1u << 25)
/* Send doorbells on demand: the device keeps a hint word in each QP's
 * ring-state page (PVRDMA_RING_STATE_SQ_DB_HINT_OFFSET); while it reads
 * PVRDMA_SQ_DB_SKIP the device reads the send queue again when an answer
 * to one of the QP's requests arrives, and a send doorbell may be left
 * out. */
#define PVRDMA_EX_CAP_SQ_DB_HINT        (1u << 24)
/* Command PVRDMA_CMD_QUERY_COUNTERS (struct pvrdma_cmd_query_counters):
 * the port's traffic and error counters, PVRDMA_CTR_*. */
#define PVRDMA_EX_CAP_COUNTERS          (1u << 23)
/* MODIFY_SRQ with PVRDMA_SRQ_MAX_WR takes the new ring (struct
 * pvrdma_cmd_modify_srq_ex) and moves the receive WQEs the device has not
 * taken yet into it, in order. */
#define PVRDMA_EX_CAP_RESIZE_SRQ        (1u << 22)
/* The device clock (the one of CQE timestamps: ns, 64 bits) reads from
 * every UAR page in two 32-bit halves, PVRDMA_UAR_CLOCK_LO/HI_OFFSET;
 * a reader takes high, low, high again, until both highs agree. */
#define PVRDMA_EX_CAP_CLOCK             (1u << 21)
#define PVRDMA_UAR_CLOCK_LO_OFFSET      0x10
#define PVRDMA_UAR_CLOCK_HI_OFFSET      0x14
/* Send opcode PVRDMA_WR_ATOMIC_WRITE on RC QPs: the 8 bytes of
 * wr.atomic.swap (little-endian) stored at wr.atomic.remote_addr
 * (8-byte aligned, REMOTE_WRITE access) in one piece, after the QP's
 * earlier requests; no local SGE; completes as PVRDMA_WC_ATOMIC_WRITE. */
#define PVRDMA_EX_CAP_ATOMIC_WRITE      (1u << 20)
#define PVRDMA_WR_ATOMIC_WRITE          0x20
#define PVRDMA_WC_ATOMIC_WRITE          0x20
/* Multicast on UD QPs: commands ATTACH_MCAST and DETACH_MCAST (struct
 * pvrdma_cmd_mcast); caps.max_mcast_grp, max_mcast_qp_attach and
 * max_total_mcast_qp_attach are the device's limits. A UD SEND to a
 * multicast GID reaches every QP attached to that group on the fabric. */
#define PVRDMA_EX_CAP_MCAST             (1u << 19)
/*
 * XRC (docs/abi.md §14, "XRC"): commands CREATE_XRCD and DESTROY_XRCD
 * (struct pvrdma_cmd_create_xrcd, _destroy_xrcd), CREATE_SRQ of srq_type
 * PVRDMA_SRQT_XRC (struct pvrdma_cmd_create_srq_ex), CREATE_QP of
 * qp_type PVRDMA_QPT_XRC_INI and PVRDMA_QPT_XRC_TGT (struct
 * pvrdma_cmd_create_qp_ex), the remote SRQ number in a send WQE of an
 * XRC_INI QP (PVRDMA_SQ_WQE_XRC_SRQN_OFF) and receive CQEs of XRC SRQs
 * marked PVRDMA_CQE_QP_XRC.
 */
#define PVRDMA_EX_CAP_XRC               (1u << 18)
/* In pvrdma_alloc_ucontext_resp.reserved (driver to provider). */
#define PVRDMA_UCTX_CQ_POLL_HINT        (1u << 0)
#define PVRDMA_UCTX_MW                  (1u << 1)   /* PVRDMA_EX_CAP_MW */
#define PVRDMA_UCTX_CQE_TIMESTAMP       (1u << 2)   /* ..._CQE_TIMESTAMP */
#define PVRDMA_UCTX_RQ_DB_HINT          (1u << 3)   /* ..._RQ_DB_HINT */
#define PVRDMA_UCTX_SQ_DB_HINT          (1u << 4)   /* ..._SQ_DB_HINT */
#define PVRDMA_UCTX_CLOCK               (1u << 5)   /* ..._CLOCK */
#define PVRDMA_UCTX_ATOMIC_WRITE        (1u << 6)   /* ..._ATOMIC_WRITE */
#define PVRDMA_UCTX_XRC                 (1u << 7)   /* ..._XRC */

/* Capabilities, written by the device on the DSRHIGH write. */
struct pvrdma_device_caps {
    uint64_t fw_ver;            /* major << 32 | minor << 16 | sub */
    uint64_t node_guid;         /* BE */
    uint64_t sys_image_guid;    /* BE */
    uint64_t max_mr_size;
    uint64_t page_size_cap;
    uint64_t atomic_arg_sizes;
    uint32_t ex_comp_mask;
    uint32_t device_cap_flags2;
    uint32_t max_fa_bit_boundary;
    uint32_t log_max_atomic_inline_arg;
    uint32_t vendor_id;
    uint32_t vendor_part_id;
    uint32_t hw_ver;
    uint32_t max_qp;            /* 1..65535 (guest tables, spec §5.6) */
    uint32_t max_qp_wr;
    uint32_t device_cap_flags;  /* IB device capability bits */
    uint32_t max_sge;
    uint32_t max_sge_rd;
    uint32_t max_cq;
    uint32_t max_cqe;
    uint32_t max_mr;
    uint32_t max_pd;
    uint32_t max_qp_rd_atom;
    uint32_t max_ee_rd_atom;
    uint32_t max_res_rd_atom;
    uint32_t max_qp_init_rd_atom;
    uint32_t max_ee_init_rd_atom;
    uint32_t max_ee;
    uint32_t max_rdd;
    uint32_t max_mw;
    uint32_t max_raw_ipv6_qp;
    uint32_t max_raw_ethy_qp;
    uint32_t max_mcast_grp;
    uint32_t max_mcast_qp_attach;
    uint32_t max_total_mcast_qp_attach;
    uint32_t max_ah;
    uint32_t max_fmr;
    uint32_t max_map_per_fmr;
    uint32_t max_srq;           /* 0: no SRQ support */
    uint32_t max_srq_wr;
    uint32_t max_srq_sge;
    uint32_t max_uar;           /* power of two */
    uint32_t gid_tbl_len;
    uint16_t max_pkeys;
    uint8_t local_ca_ack_delay;
    uint8_t phys_port_cnt;
    uint8_t mode;               /* PVRDMA_DEVICE_MODE_* */
    uint8_t atomic_ops;         /* PVRDMA_ATOMIC_OP_* */
    uint8_t bmme_flags;         /* PVRDMA_BMME_FLAG_* */
    uint8_t gid_types;          /* PVRDMA_GID_TYPE_FLAG_* (exactly one) */
    uint32_t max_fast_reg_page_list_len;
} __attribute__((packed));
PVRDMA_ABI_SIZE(struct pvrdma_device_caps, 208);
PVRDMA_ABI_OFF(struct pvrdma_device_caps, max_qp, 76);
PVRDMA_ABI_OFF(struct pvrdma_device_caps, max_uar, 188);
PVRDMA_ABI_OFF(struct pvrdma_device_caps, max_pkeys, 196);
PVRDMA_ABI_OFF(struct pvrdma_device_caps, max_fast_reg_page_list_len, 204);

/* The DSR: guest memory, 280 bytes, packed. */
struct pvrdma_device_shared_region {
    uint32_t driver_version;    /* W: driver's interface version */
    uint32_t pad;               /* MBZ */
    struct pvrdma_gos_info gos_info;
    uint64_t cmd_slot_dma;      /* W: command slot page */
    uint64_t resp_slot_dma;     /* W: response slot page */
    struct pvrdma_ring_page_info async_ring_pages;
    struct pvrdma_ring_page_info cq_ring_pages;
    union {
        uint32_t uar_pfn;       /* W, driver_version < 19 */
        uint64_t uar_pfn64;     /* W, driver_version >= 19 */
    };
    struct pvrdma_device_caps caps; /* R: written by the device */
} __attribute__((packed));
PVRDMA_ABI_SIZE(struct pvrdma_device_shared_region, 280);
PVRDMA_ABI_OFF(struct pvrdma_device_shared_region, cmd_slot_dma, 16);
PVRDMA_ABI_OFF(struct pvrdma_device_shared_region, async_ring_pages, 32);
PVRDMA_ABI_OFF(struct pvrdma_device_shared_region, cq_ring_pages, 48);
PVRDMA_ABI_OFF(struct pvrdma_device_shared_region, uar_pfn64, 64);
PVRDMA_ABI_OFF(struct pvrdma_device_shared_region, caps, 72);

#define PVRDMA_DSR_CAPS_OFFSET  offsetof(struct pvrdma_device_shared_region, caps)

/* ---- spec §5.4: shared enumerations --------------------------------------- */

enum pvrdma_port_state {
    PVRDMA_PORT_NOP = 0,
    PVRDMA_PORT_DOWN = 1,
    PVRDMA_PORT_INIT = 2,
    PVRDMA_PORT_ARMED = 3,
    PVRDMA_PORT_ACTIVE = 4,
    PVRDMA_PORT_ACTIVE_DEFER = 5,
};

enum pvrdma_mtu {
    PVRDMA_MTU_256 = 1,
    PVRDMA_MTU_512 = 2,
    PVRDMA_MTU_1024 = 3,
    PVRDMA_MTU_2048 = 4,
    PVRDMA_MTU_4096 = 5,
};

enum pvrdma_qp_state {
    PVRDMA_QPS_RESET = 0,
    PVRDMA_QPS_INIT = 1,
    PVRDMA_QPS_RTR = 2,
    PVRDMA_QPS_RTS = 3,
    PVRDMA_QPS_SQD = 4,
    PVRDMA_QPS_SQE = 5,
    PVRDMA_QPS_ERR = 6,
};

enum pvrdma_mig_state {
    PVRDMA_MIG_MIGRATED = 0,
    PVRDMA_MIG_REARM = 1,
    PVRDMA_MIG_ARMED = 2,
};

enum pvrdma_qp_type {
    PVRDMA_QPT_SMI = 0,
    PVRDMA_QPT_GSI = 1,
    PVRDMA_QPT_RC = 2,
    PVRDMA_QPT_UC = 3,
    PVRDMA_QPT_UD = 4,
    PVRDMA_QPT_XRC_INI = 9,     /* PVRDMA_EX_CAP_XRC: send side */
    PVRDMA_QPT_XRC_TGT = 10,    /* PVRDMA_EX_CAP_XRC: receive side */
};

/* CREATE_SRQ srq_type. */
#define PVRDMA_SRQT_BASIC               0
#define PVRDMA_SRQT_XRC                 1   /* PVRDMA_EX_CAP_XRC */

/* MR and QP access flags (IB values). */
#define PVRDMA_ACCESS_LOCAL_WRITE       (1u << 0)
#define PVRDMA_ACCESS_REMOTE_WRITE      (1u << 1)
#define PVRDMA_ACCESS_REMOTE_READ       (1u << 2)
#define PVRDMA_ACCESS_REMOTE_ATOMIC     (1u << 3)
#define PVRDMA_ACCESS_MW_BIND           (1u << 4)
#define PVRDMA_ACCESS_ZERO_BASED        (1u << 5)
#define PVRDMA_ACCESS_ON_DEMAND         (1u << 6)
#define PVRDMA_ACCESS_FLAGS_MASK        0x7Fu

/* CREATE_MR flags. */
#define PVRDMA_MR_FLAG_DMA              (1u << 0)
#define PVRDMA_MR_FLAG_FRMR             (1u << 1)
/* Project extension PVRDMA_EX_CAP_MW: a memory window of type 1 or 2. */
#define PVRDMA_MR_FLAG_MW_TYPE1         (1u << 2)
#define PVRDMA_MR_FLAG_MW_TYPE2         (1u << 3)

/* MODIFY_QP / QUERY_QP attribute mask (IB values). */
#define PVRDMA_QP_STATE                 (1u << 0)
#define PVRDMA_QP_CUR_STATE             (1u << 1)
#define PVRDMA_QP_EN_SQD_ASYNC_NOTIFY   (1u << 2)
#define PVRDMA_QP_ACCESS_FLAGS          (1u << 3)
#define PVRDMA_QP_PKEY_INDEX            (1u << 4)
#define PVRDMA_QP_PORT                  (1u << 5)
#define PVRDMA_QP_QKEY                  (1u << 6)
#define PVRDMA_QP_AV                    (1u << 7)
#define PVRDMA_QP_PATH_MTU              (1u << 8)
#define PVRDMA_QP_TIMEOUT               (1u << 9)
#define PVRDMA_QP_RETRY_CNT             (1u << 10)
#define PVRDMA_QP_RNR_RETRY             (1u << 11)
#define PVRDMA_QP_RQ_PSN                (1u << 12)
#define PVRDMA_QP_MAX_QP_RD_ATOMIC      (1u << 13)
#define PVRDMA_QP_ALT_PATH              (1u << 14)
#define PVRDMA_QP_MIN_RNR_TIMER         (1u << 15)
#define PVRDMA_QP_SQ_PSN                (1u << 16)
#define PVRDMA_QP_MAX_DEST_RD_ATOMIC    (1u << 17)
#define PVRDMA_QP_PATH_MIG_STATE        (1u << 18)
#define PVRDMA_QP_CAP                   (1u << 19)
#define PVRDMA_QP_DEST_QPN              (1u << 20)
#define PVRDMA_QP_ATTR_MASK_MAX         0x1FFFFFu

/* SRQ attribute mask. */
#define PVRDMA_SRQ_MAX_WR               (1u << 0)
#define PVRDMA_SRQ_LIMIT                (1u << 1)

#define PVRDMA_AH_FLAG_GRH              1

/* ---- spec §5.4: shared attribute structures ------------------------------ */

struct pvrdma_global_route {
    uint8_t dgid[16];           /* raw, network order */
    uint32_t flow_label;
    uint8_t sgid_index;
    uint8_t hop_limit;
    uint8_t traffic_class;
    uint8_t reserved;
};
PVRDMA_ABI_SIZE(struct pvrdma_global_route, 24);

struct pvrdma_ah_attr {
    struct pvrdma_global_route grh;
    uint16_t dlid;
    uint16_t vlan_id;
    uint8_t sl;
    uint8_t src_path_bits;
    uint8_t static_rate;
    uint8_t ah_flags;           /* PVRDMA_AH_FLAG_GRH */
    uint8_t port_num;
    uint8_t dmac[6];
    uint8_t reserved;
};
PVRDMA_ABI_SIZE(struct pvrdma_ah_attr, 40);

struct pvrdma_qp_cap {
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline_data;
    uint32_t reserved;
};
PVRDMA_ABI_SIZE(struct pvrdma_qp_cap, 24);

struct pvrdma_qp_attr {
    uint32_t qp_state;          /* enum pvrdma_qp_state */
    uint32_t cur_qp_state;
    uint32_t path_mtu;          /* enum pvrdma_mtu */
    uint32_t path_mig_state;    /* enum pvrdma_mig_state */
    uint32_t qkey;
    uint32_t rq_psn;
    uint32_t sq_psn;
    uint32_t dest_qp_num;
    uint32_t qp_access_flags;
    uint16_t pkey_index;
    uint16_t alt_pkey_index;
    uint8_t en_sqd_async_notify;
    uint8_t sq_draining;
    uint8_t max_rd_atomic;
    uint8_t max_dest_rd_atomic;
    uint8_t min_rnr_timer;
    uint8_t port_num;
    uint8_t timeout;
    uint8_t retry_cnt;
    uint8_t rnr_retry;
    uint8_t alt_port_num;
    uint8_t alt_timeout;
    uint8_t reserved[5];
    struct pvrdma_qp_cap cap;
    struct pvrdma_ah_attr ah_attr;
    struct pvrdma_ah_attr alt_ah_attr;
};
PVRDMA_ABI_SIZE(struct pvrdma_qp_attr, 160);
PVRDMA_ABI_OFF(struct pvrdma_qp_attr, cap, 56);
PVRDMA_ABI_OFF(struct pvrdma_qp_attr, ah_attr, 80);
PVRDMA_ABI_OFF(struct pvrdma_qp_attr, alt_ah_attr, 120);

struct pvrdma_srq_attr {
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t srq_limit;
    uint32_t reserved;
};
PVRDMA_ABI_SIZE(struct pvrdma_srq_attr, 16);

struct pvrdma_port_attr {
    uint32_t state;             /* enum pvrdma_port_state */
    uint32_t max_mtu;           /* enum pvrdma_mtu */
    uint32_t active_mtu;        /* enum pvrdma_mtu */
    uint32_t gid_tbl_len;       /* <= caps.gid_tbl_len */
    uint32_t port_cap_flags;
    uint32_t max_msg_sz;
    uint32_t bad_pkey_cntr;
    uint32_t qkey_viol_cntr;
    uint16_t pkey_tbl_len;
    uint16_t lid;
    uint16_t sm_lid;
    uint8_t lmc;
    uint8_t max_vl_num;
    uint8_t sm_sl;
    uint8_t subnet_timeout;
    uint8_t init_type_reply;
    uint8_t active_width;
    uint8_t active_speed;
    uint8_t phys_state;
    uint8_t reserved[2];
};
PVRDMA_ABI_SIZE(struct pvrdma_port_attr, 48);

/* ---- spec §5: command channel -------------------------------------------- */

enum pvrdma_cmd_code {
    PVRDMA_CMD_QUERY_PORT = 0,
    PVRDMA_CMD_QUERY_PKEY = 1,
    PVRDMA_CMD_CREATE_PD = 2,
    PVRDMA_CMD_DESTROY_PD = 3,
    PVRDMA_CMD_CREATE_MR = 4,
    PVRDMA_CMD_DESTROY_MR = 5,
    PVRDMA_CMD_CREATE_CQ = 6,
    PVRDMA_CMD_RESIZE_CQ = 7,
    PVRDMA_CMD_DESTROY_CQ = 8,
    PVRDMA_CMD_CREATE_QP = 9,
    PVRDMA_CMD_MODIFY_QP = 10,
    PVRDMA_CMD_QUERY_QP = 11,
    PVRDMA_CMD_DESTROY_QP = 12,
    PVRDMA_CMD_CREATE_UC = 13,
    PVRDMA_CMD_DESTROY_UC = 14,
    PVRDMA_CMD_CREATE_BIND = 15,
    PVRDMA_CMD_DESTROY_BIND = 16,
    PVRDMA_CMD_CREATE_SRQ = 17,
    PVRDMA_CMD_MODIFY_SRQ = 18,
    PVRDMA_CMD_QUERY_SRQ = 19,
    PVRDMA_CMD_DESTROY_SRQ = 20,
    PVRDMA_CMD_MODIFY_MR = 21,          /* PVRDMA_EX_CAP_MODIFY_MR */
    PVRDMA_CMD_QUERY_COUNTERS = 22,     /* PVRDMA_EX_CAP_COUNTERS */
    PVRDMA_CMD_ATTACH_MCAST = 23,       /* PVRDMA_EX_CAP_MCAST */
    PVRDMA_CMD_DETACH_MCAST = 24,       /* PVRDMA_EX_CAP_MCAST */
    PVRDMA_CMD_CREATE_XRCD = 25,        /* PVRDMA_EX_CAP_XRC */
    PVRDMA_CMD_DESTROY_XRCD = 26,       /* PVRDMA_EX_CAP_XRC */
    PVRDMA_CMD_MAX = 27,
};

/* Response code of command c. */
#define PVRDMA_CMD_RESP_BASE            0x80000000u
#define PVRDMA_CMD_ACK(c)               (PVRDMA_CMD_RESP_BASE + (uint32_t)(c))

/* The command slot carries up to this many bytes; the response slot too. */
#define PVRDMA_CMD_SLOT_SIZE            184
#define PVRDMA_RESP_SLOT_SIZE           176

struct pvrdma_cmd_hdr {
    uint64_t response;          /* opaque cookie, echoed in the response */
    uint32_t cmd;               /* enum pvrdma_cmd_code */
    uint32_t reserved;          /* MBZ */
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_hdr, 16);

struct pvrdma_cmd_resp_hdr {
    uint64_t response;          /* copied from the request */
    uint32_t ack;               /* PVRDMA_CMD_ACK(cmd) */
    uint8_t err;                /* positive errno, 0 on success */
    uint8_t reserved[3];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_resp_hdr, 16);

struct pvrdma_cmd_query_port {
    struct pvrdma_cmd_hdr hdr;
    uint8_t port_num;           /* 1-based */
    uint8_t reserved[7];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_query_port, 24);

struct pvrdma_cmd_query_port_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    struct pvrdma_port_attr attrs;
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_query_port_resp, 64);

struct pvrdma_cmd_query_pkey {
    struct pvrdma_cmd_hdr hdr;
    uint8_t port_num;
    uint8_t index;
    uint8_t reserved[6];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_query_pkey, 24);

struct pvrdma_cmd_query_pkey_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint16_t pkey;
    uint8_t reserved[6];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_query_pkey_resp, 24);

struct pvrdma_cmd_create_uc {
    struct pvrdma_cmd_hdr hdr;
    union {
        uint32_t pfn;           /* driver_version < 19 */
        uint64_t pfn64;         /* driver_version >= 19 */
    };
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_uc, 24);

struct pvrdma_cmd_create_uc_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t ctx_handle;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_uc_resp, 24);

struct pvrdma_cmd_destroy_uc {
    struct pvrdma_cmd_hdr hdr;
    uint32_t ctx_handle;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_destroy_uc, 24);

struct pvrdma_cmd_create_pd {
    struct pvrdma_cmd_hdr hdr;
    uint32_t ctx_handle;        /* 0 for kernel PDs */
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_pd, 24);

struct pvrdma_cmd_create_pd_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t pd_handle;         /* < 2^24 */
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_pd_resp, 24);

struct pvrdma_cmd_destroy_pd {
    struct pvrdma_cmd_hdr hdr;
    uint32_t pd_handle;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_destroy_pd, 24);

struct pvrdma_cmd_create_mr {
    struct pvrdma_cmd_hdr hdr;
    uint64_t start;             /* user MR: VA of the buffer (= IOVA) */
    uint64_t length;            /* user MR: bytes */
    uint64_t pdir_dma;          /* user MR: PDIR of the pages */
    uint32_t pd_handle;
    uint32_t access_flags;      /* PVRDMA_ACCESS_* */
    uint32_t flags;             /* 0 user, PVRDMA_MR_FLAG_DMA / _FRMR */
    uint32_t nchunks;           /* user: pages; FRMR: max_num_sg */
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_mr, 56);

struct pvrdma_cmd_create_mr_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t mr_handle;
    uint32_t lkey;
    uint32_t rkey;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_mr_resp, 32);

struct pvrdma_cmd_destroy_mr {
    struct pvrdma_cmd_hdr hdr;
    uint32_t mr_handle;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_destroy_mr, 24);

/* Project extension PVRDMA_EX_CAP_MODIFY_MR; header-only response. */
#define PVRDMA_MODIFY_MR_ACCESS         (1u << 0)
#define PVRDMA_MODIFY_MR_PD             (1u << 1)
struct pvrdma_cmd_modify_mr {
    struct pvrdma_cmd_hdr hdr;
    uint32_t mr_handle;         /* a user MR */
    uint32_t flags;             /* PVRDMA_MODIFY_MR_ACCESS | _PD */
    uint32_t access_flags;      /* with _ACCESS: PVRDMA_ACCESS_* */
    uint32_t pd_handle;         /* with _PD: of the MR's context */
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_modify_mr, 32);

/*
 * Project extension PVRDMA_EX_CAP_COUNTERS: the port's counters, indexed
 * by enum pvrdma_counter (docs/abi.md §14), PVRDMA_CTR_PER_QUERY at a
 * time from index @first.  The response says how many the device keeps
 * (@total); values past it, or past the ones asked, are 0.
 */
enum pvrdma_counter {
    PVRDMA_CTR_SENT_PKTS,       /* request and READ/atomic response packets */
    PVRDMA_CTR_RCVD_PKTS,
    PVRDMA_CTR_SENT_BYTES,      /* payload of SEND/WRITE and READ responses */
    PVRDMA_CTR_RCVD_BYTES,
    PVRDMA_CTR_RDMA_SENDS,      /* SEND requests, UD included */
    PVRDMA_CTR_RDMA_RECVS,      /* SENDs placed into a receive WQE */
    PVRDMA_CTR_RDMA_WRITES,
    PVRDMA_CTR_RDMA_WRITES_RCVD,
    PVRDMA_CTR_RDMA_READS,
    PVRDMA_CTR_RDMA_READS_RCVD,
    PVRDMA_CTR_ATOMICS,
    PVRDMA_CTR_ATOMICS_RCVD,
    PVRDMA_CTR_RETRIES,         /* requests sent again after an RNR NAK */
    PVRDMA_CTR_RCVD_RNR_NAKS,
    PVRDMA_CTR_SENT_RNR_NAKS,
    PVRDMA_CTR_RETRY_EXC_ERRS,  /* completions RETRY_EXC_ERR */
    PVRDMA_CTR_RNR_RETRY_EXC_ERRS,
    PVRDMA_CTR_COMPLETION_ERRS, /* error completions, flushes not counted */
    PVRDMA_CTR_LINK_DOWNED,     /* fabric links that went down */
    PVRDMA_CTR_LINKS_UP,        /* fabric links up now (a level) */
    PVRDMA_CTR_NUM,
};
#define PVRDMA_CTR_PER_QUERY            16

struct pvrdma_cmd_query_counters {
    struct pvrdma_cmd_hdr hdr;
    uint32_t first;             /* index of the first counter wanted */
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_query_counters, 24);

struct pvrdma_cmd_query_counters_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t first;             /* as asked */
    uint32_t total;             /* counters the device keeps */
    uint64_t value[PVRDMA_CTR_PER_QUERY];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_query_counters_resp, 152);

/*
 * Project extension PVRDMA_EX_CAP_MCAST: UD QP @qp_handle joins (ATTACH)
 * or leaves (DETACH) the multicast group @mgid; header-only response.
 */
struct pvrdma_cmd_mcast {
    struct pvrdma_cmd_hdr hdr;
    uint32_t qp_handle;
    uint8_t reserved[4];
    uint8_t mgid[16];           /* ff00::/8, or ::ffff:224.0.0.0/100 */
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_mcast, 40);

/*
 * Project extension PVRDMA_EX_CAP_XRC: an XRC domain.  It belongs to the
 * device, not to a user context (processes share it); at most caps.max_pd
 * of them.  DESTROY_XRCD fails with EBUSY while an SRQ or QP uses it.
 */
struct pvrdma_cmd_create_xrcd {
    struct pvrdma_cmd_hdr hdr;
    uint8_t reserved[8];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_xrcd, 24);

struct pvrdma_cmd_create_xrcd_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t xrcd_handle;       /* != 0 */
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_xrcd_resp, 24);

struct pvrdma_cmd_destroy_xrcd {
    struct pvrdma_cmd_hdr hdr;
    uint32_t xrcd_handle;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_destroy_xrcd, 24);

struct pvrdma_cmd_create_cq {
    struct pvrdma_cmd_hdr hdr;
    uint64_t pdir_dma;          /* page 0 = ring state */
    uint32_t ctx_handle;        /* 0 for kernel CQs */
    uint32_t cqe;               /* power of two */
    uint32_t nchunks;           /* pages incl. the ring-state page */
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_cq, 40);
/* reserved[0] of CREATE_CQ (PVRDMA_EX_CAP_CQE_TIMESTAMP). */
#define PVRDMA_CQ_FLAG_TIMESTAMP        (1u << 0)

struct pvrdma_cmd_create_cq_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t cq_handle;
    uint32_t cqe;               /* ring size actually used */
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_cq_resp, 24);

struct pvrdma_cmd_resize_cq {
    struct pvrdma_cmd_hdr hdr;
    uint32_t cq_handle;
    uint32_t cqe;
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_resize_cq, 24);

/*
 * Project extension (PVRDMA_EX_CAP_RESIZE_CQ): RESIZE_CQ with the new
 * ring, laid out like CREATE_CQ's (page 0 the ring state, then cqe
 * CQEs). The first 24 bytes are the VMware request.
 */
struct pvrdma_cmd_resize_cq_ex {
    struct pvrdma_cmd_hdr hdr;
    uint32_t cq_handle;
    uint32_t cqe;               /* new ring size, a power of two */
    uint64_t pdir_dma;          /* the new ring's page directory */
    uint32_t nchunks;           /* its pages, ring-state page included */
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_resize_cq_ex, 40);

struct pvrdma_cmd_resize_cq_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t cqe;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_resize_cq_resp, 24);

struct pvrdma_cmd_destroy_cq {
    struct pvrdma_cmd_hdr hdr;
    uint32_t cq_handle;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_destroy_cq, 24);

struct pvrdma_cmd_create_qp {
    struct pvrdma_cmd_hdr hdr;
    uint64_t pdir_dma;          /* ring state, SQ pages, RQ pages */
    uint32_t pd_handle;
    uint32_t send_cq_handle;
    uint32_t recv_cq_handle;
    uint32_t srq_handle;        /* valid if is_srq */
    uint32_t max_send_wr;       /* power of two */
    uint32_t max_recv_wr;       /* power of two; 0 with an SRQ */
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline_data;
    uint32_t lkey;              /* unused */
    uint32_t access_flags;      /* unused */
    uint16_t total_chunks;      /* pages incl. the ring-state page */
    uint16_t send_chunks;       /* SQ pages, excl. the ring-state page */
    uint16_t max_atomic_arg;
    uint8_t sq_sig_all;
    uint8_t qp_type;            /* enum pvrdma_qp_type */
    uint8_t is_srq;
    uint8_t reserved[3];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_qp, 80);
PVRDMA_ABI_OFF(struct pvrdma_cmd_create_qp, total_chunks, 68);

/*
 * Project extension PVRDMA_EX_CAP_XRC: CREATE_QP with the XRC domain of
 * an XRC_TGT QP.  The first 80 bytes are the VMware request.
 * Other QP types ignore bytes 80..87 (stale bytes of the stock driver).
 *  - XRC_INI: as an RC QP with no receive side: max_recv_wr,
 *    max_recv_sge, is_srq, srq_handle and recv_cq_handle 0, the pages
 *    the ring state and the SQ (total_chunks = 1 + send_chunks).
 *  - XRC_TGT: no queue, no CQ, no PD: pdir_dma, pd_handle, the CQ and
 *    SRQ handles, every max_* and both chunk counts 0; xrcd_handle names
 *    its domain.  Its messages go to the XRC SRQ each one names.
 */
struct pvrdma_cmd_create_qp_ex {
    struct pvrdma_cmd_create_qp qp;
    uint32_t xrcd_handle;       /* XRC_TGT only */
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_qp_ex, 88);

/* Interface version < 20: the QP number is also the handle. */
struct pvrdma_cmd_create_qp_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t qpn;
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline_data;
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_qp_resp, 40);

/* Interface version >= 20. */
struct pvrdma_cmd_create_qp_resp_v2 {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t qpn;               /* wire QP number */
    uint32_t qp_handle;         /* device handle, < max_qp, != 0 */
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline_data;
    uint32_t reserved;          /* pads to 48; not written by Linux's view */
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_qp_resp_v2, 48);

struct pvrdma_cmd_modify_qp {
    struct pvrdma_cmd_hdr hdr;
    uint32_t qp_handle;
    uint32_t attr_mask;         /* PVRDMA_QP_* */
    struct pvrdma_qp_attr attrs;
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_modify_qp, 184);

struct pvrdma_cmd_query_qp {
    struct pvrdma_cmd_hdr hdr;
    uint32_t qp_handle;
    uint32_t attr_mask;
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_query_qp, 24);

struct pvrdma_cmd_query_qp_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    struct pvrdma_qp_attr attrs;
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_query_qp_resp, 176);

struct pvrdma_cmd_destroy_qp {
    struct pvrdma_cmd_hdr hdr;
    uint32_t qp_handle;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_destroy_qp, 24);

struct pvrdma_cmd_destroy_qp_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t events_reported;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_destroy_qp_resp, 24);

struct pvrdma_cmd_create_bind {
    struct pvrdma_cmd_hdr hdr;
    uint32_t mtu;               /* bytes (Linux: 1024) */
    uint32_t vlan;              /* 0xFFF = none */
    uint32_t index;             /* SGID table index */
    uint8_t new_gid[16];        /* raw */
    uint8_t gid_type;           /* PVRDMA_GID_TYPE_FLAG_* */
    uint8_t reserved[3];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_bind, 48);

struct pvrdma_cmd_destroy_bind {
    struct pvrdma_cmd_hdr hdr;
    uint32_t index;
    uint8_t dest_gid[16];       /* raw */
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_destroy_bind, 40);

struct pvrdma_cmd_create_srq {
    struct pvrdma_cmd_hdr hdr;
    uint64_t pdir_dma;          /* page 0 = ring state */
    uint32_t pd_handle;
    uint32_t nchunks;           /* pages incl. the ring-state page */
    struct pvrdma_srq_attr attrs;
    uint8_t srq_type;           /* 0 = basic */
    uint8_t reserved[7];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_srq, 56);

/*
 * Project extension PVRDMA_EX_CAP_XRC: CREATE_SRQ of srq_type
 * PVRDMA_SRQT_XRC with its XRC domain and the CQ its receive completions
 * go to (srq_type 0 ignores both: the stock driver leaves stale bytes
 * after its 56).  The response's srqn is also the SRQ number XRC
 * senders name (PVRDMA_SQ_WQE_XRC_SRQN_OFF).
 */
struct pvrdma_cmd_create_srq_ex {
    struct pvrdma_cmd_create_srq srq;
    uint32_t xrcd_handle;
    uint32_t cq_handle;
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_srq_ex, 64);

struct pvrdma_cmd_create_srq_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    uint32_t srqn;              /* SRQ handle, < max_srq */
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_create_srq_resp, 24);

struct pvrdma_cmd_modify_srq {
    struct pvrdma_cmd_hdr hdr;
    uint32_t srq_handle;
    uint32_t attr_mask;         /* PVRDMA_SRQ_* */
    struct pvrdma_srq_attr attrs;
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_modify_srq, 40);

/*
 * Project extension (PVRDMA_EX_CAP_RESIZE_SRQ): MODIFY_SRQ with
 * PVRDMA_SRQ_MAX_WR in attr_mask names the new ring, laid out like
 * CREATE_SRQ's (page 0 the ring state, then attrs.max_wr WQEs of the
 * SRQ's max_sge). The first 40 bytes are the VMware request.
 */
struct pvrdma_cmd_modify_srq_ex {
    struct pvrdma_cmd_hdr hdr;
    uint32_t srq_handle;
    uint32_t attr_mask;         /* PVRDMA_SRQ_* */
    struct pvrdma_srq_attr attrs;   /* max_wr: the new size */
    uint64_t pdir_dma;          /* the new ring's page directory */
    uint32_t nchunks;           /* its pages, ring-state page included */
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_modify_srq_ex, 56);

struct pvrdma_cmd_query_srq {
    struct pvrdma_cmd_hdr hdr;
    uint32_t srq_handle;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_query_srq, 24);

struct pvrdma_cmd_query_srq_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    struct pvrdma_srq_attr attrs;
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_query_srq_resp, 32);

struct pvrdma_cmd_destroy_srq {
    struct pvrdma_cmd_hdr hdr;
    uint32_t srq_handle;
    uint8_t reserved[4];
};
PVRDMA_ABI_SIZE(struct pvrdma_cmd_destroy_srq, 24);

union pvrdma_cmd_req {
    struct pvrdma_cmd_hdr hdr;
    struct pvrdma_cmd_query_port query_port;
    struct pvrdma_cmd_query_pkey query_pkey;
    struct pvrdma_cmd_create_uc create_uc;
    struct pvrdma_cmd_destroy_uc destroy_uc;
    struct pvrdma_cmd_create_pd create_pd;
    struct pvrdma_cmd_destroy_pd destroy_pd;
    struct pvrdma_cmd_create_mr create_mr;
    struct pvrdma_cmd_destroy_mr destroy_mr;
    struct pvrdma_cmd_modify_mr modify_mr;
    struct pvrdma_cmd_query_counters query_counters;
    struct pvrdma_cmd_mcast mcast;
    struct pvrdma_cmd_create_xrcd create_xrcd;
    struct pvrdma_cmd_destroy_xrcd destroy_xrcd;
    struct pvrdma_cmd_create_cq create_cq;
    struct pvrdma_cmd_resize_cq resize_cq;
    struct pvrdma_cmd_resize_cq_ex resize_cq_ex;
    struct pvrdma_cmd_destroy_cq destroy_cq;
    struct pvrdma_cmd_create_qp create_qp;
    struct pvrdma_cmd_create_qp_ex create_qp_ex;
    struct pvrdma_cmd_modify_qp modify_qp;
    struct pvrdma_cmd_query_qp query_qp;
    struct pvrdma_cmd_destroy_qp destroy_qp;
    struct pvrdma_cmd_create_bind create_bind;
    struct pvrdma_cmd_destroy_bind destroy_bind;
    struct pvrdma_cmd_create_srq create_srq;
    struct pvrdma_cmd_create_srq_ex create_srq_ex;
    struct pvrdma_cmd_modify_srq modify_srq;
    struct pvrdma_cmd_modify_srq_ex modify_srq_ex;
    struct pvrdma_cmd_query_srq query_srq;
    struct pvrdma_cmd_destroy_srq destroy_srq;
};
PVRDMA_ABI_SIZE(union pvrdma_cmd_req, PVRDMA_CMD_SLOT_SIZE);

union pvrdma_cmd_resp {
    struct pvrdma_cmd_resp_hdr hdr;
    struct pvrdma_cmd_query_port_resp query_port_resp;
    struct pvrdma_cmd_query_pkey_resp query_pkey_resp;
    struct pvrdma_cmd_create_uc_resp create_uc_resp;
    struct pvrdma_cmd_create_pd_resp create_pd_resp;
    struct pvrdma_cmd_create_mr_resp create_mr_resp;
    struct pvrdma_cmd_create_cq_resp create_cq_resp;
    struct pvrdma_cmd_resize_cq_resp resize_cq_resp;
    struct pvrdma_cmd_create_qp_resp create_qp_resp;
    struct pvrdma_cmd_create_qp_resp_v2 create_qp_resp_v2;
    struct pvrdma_cmd_query_qp_resp query_qp_resp;
    struct pvrdma_cmd_destroy_qp_resp destroy_qp_resp;
    struct pvrdma_cmd_create_srq_resp create_srq_resp;
    struct pvrdma_cmd_query_srq_resp query_srq_resp;
    struct pvrdma_cmd_query_counters_resp query_counters_resp;
    struct pvrdma_cmd_create_xrcd_resp create_xrcd_resp;
};
PVRDMA_ABI_SIZE(union pvrdma_cmd_resp, PVRDMA_RESP_SLOT_SIZE);

/* ---- spec §8: work queue element sizes ----------------------------------- */

#define PVRDMA_SQ_WQE_HDR_SIZE          80      /* struct pvrdma_sq_wqe_hdr */
#define PVRDMA_RQ_WQE_HDR_SIZE          16      /* struct pvrdma_rq_wqe_hdr */
#define PVRDMA_SGE_SIZE                 16      /* struct pvrdma_sge */
#define PVRDMA_CQE_SIZE                 64      /* struct pvrdma_cqe */

/*
 * Project convention (no new field, so no negotiation needed): a receive
 * completion with PVRDMA_WC_WITH_INVALIDATE carries the invalidated rkey
 * in struct pvrdma_cqe.imm_data as a plain little-endian u32. Linux keeps
 * ib_wc.ex.imm_data and ex.invalidate_rkey in one union, so a driver that
 * copies imm_data verbatim (as upstream vmw_pvrdma does) reports it too.
 */
PVRDMA_ABI_SIZE(struct pvrdma_sq_wqe_hdr, PVRDMA_SQ_WQE_HDR_SIZE);

/*
 * Project extension PVRDMA_EX_CAP_MW: a send WQE with opcode
 * PVRDMA_WR_BIND_MW carries this in place of struct pvrdma_sq_wqe_hdr's
 * wr union (offset 32).  @rkey names the window by its index (rkey >> 8)
 * and gives its new key byte; @length 0 unbinds a type 1 window.
 */
struct pvrdma_ex_bind_mw {
    uint64_t addr;              /* window start, in the MR's addresses */
    uint64_t length;
    uint32_t rkey;              /* the window's new rkey */
    uint32_t mr_lkey;           /* the MR bound to (MW_BIND access) */
    uint32_t access;            /* REMOTE_* and ZERO_BASED (type 2) */
    uint32_t reserved;
};
#define PVRDMA_EX_BIND_MW_OFF           32
PVRDMA_ABI_SIZE(struct pvrdma_ex_bind_mw, 32);
PVRDMA_ABI_OFF(struct pvrdma_sq_wqe_hdr, wr, PVRDMA_EX_BIND_MW_OFF);
PVRDMA_ABI_SIZE(struct pvrdma_rq_wqe_hdr, PVRDMA_RQ_WQE_HDR_SIZE);
PVRDMA_ABI_SIZE(struct pvrdma_sge, PVRDMA_SGE_SIZE);
PVRDMA_ABI_SIZE(struct pvrdma_cqe, PVRDMA_CQE_SIZE);

/*
 * Project extension PVRDMA_EX_CAP_CQE_TIMESTAMP: on a CQ created with
 * PVRDMA_CQ_FLAG_TIMESTAMP, reserved2 (offset 58) holds the device clock
 * when the CQE was written: nanoseconds, low 48 bits, little-endian.
 */
#define PVRDMA_CQE_TS_OFF               58
#define PVRDMA_CQE_TS_BITS              48
#define PVRDMA_CQE_TS_KHZ               1000000u    /* 1 GHz: ns */
PVRDMA_ABI_OFF(struct pvrdma_cqe, reserved2, PVRDMA_CQE_TS_OFF);

/*
 * Project extension PVRDMA_EX_CAP_XRC.  A send WQE of an XRC_INI QP
 * names the XRC SRQ of the responder in the low 24 bits of struct
 * pvrdma_sq_wqe_hdr.reserved (offset 28; the upper bits MBZ); other QPs
 * ignore the word.  A receive CQE of an XRC SRQ is written to the SRQ's
 * CQ with qp = the XRC_TGT QP's handle | its wire QP number << 32 |
 * PVRDMA_CQE_QP_XRC: a process polls it without knowing that QP.
 */
#define PVRDMA_SQ_WQE_XRC_SRQN_OFF      28
#define PVRDMA_XRC_SRQN_MASK            0xFFFFFFu
#define PVRDMA_CQE_QP_XRC               (1ull << 63)
#define PVRDMA_CQE_QP_XRC_QPN_SHIFT     32
PVRDMA_ABI_OFF(struct pvrdma_sq_wqe_hdr, reserved, PVRDMA_SQ_WQE_XRC_SRQN_OFF);

#endif /* PVRDMA_DEV_ABI_H */
