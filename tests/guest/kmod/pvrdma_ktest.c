// SPDX-License-Identifier: GPL-2.0-only
/*
 * pvrdma_ktest: kernel-verbs test of the pvrdma driver's RC data path.
 *
 * On load it takes the IB device "ibdev" (and "ibdev2" if given), creates
 * two RC QPs A and B (both on ibdev, or A on ibdev and B on ibdev2),
 * connects them over GID index 0 (or the first RoCE v2 GID) and checks
 * every RC opcode and the usual error completions, byte by byte and field
 * by field.  Each check prints one line:
 *
 *   ktest: PASS <name>
 *   ktest: FAIL <name>: <why>
 *
 * and the run ends with "ktest: RESULT passed=N failed=M".  Everything is
 * torn down before init returns, and init returns 0 whatever failed, so
 * the log can be read and the module unloaded at once.
 *
 * With loop=1 it is a kernel user as ULPs are: an ib_client.  Whenever a
 * device named "ibdev" appears (at load, or hot-plugged later) a thread
 * connects two QPs on it and runs SEND, RDMA WRITE and RDMA READ checks
 * in rounds until the device goes away (the client's remove: the thread
 * finishes its check and tears everything down before the removal goes
 * on) or the module is unloaded; then it prints
 * "ktest: LOOP <device> rounds=R passed=N failed=M".
 *
 * Memory: each side has one DMA-coherent buffer.  Local SGEs use the PD's
 * local_dma_lkey (the driver's DMA MR) with bus addresses; the remotely
 * accessible window is a fast-register MR over part of that buffer.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/etherdevice.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

MODULE_DESCRIPTION("pvrdma kernel verbs test");
MODULE_LICENSE("GPL");

static char *ibdev = "pvrdma0";
module_param(ibdev, charp, 0444);
MODULE_PARM_DESC(ibdev, "IB device of QP A (and of QP B without ibdev2)");

static char *ibdev2 = "";
module_param(ibdev2, charp, 0444);
MODULE_PARM_DESC(ibdev2, "IB device of QP B (default: ibdev)");

/* Upstream vmw_pvrdma offers SRQs to user space only (spec §5.2). */
static bool kernel_srq = true;
module_param(kernel_srq, bool, 0444);
MODULE_PARM_DESC(kernel_srq,
		 "the driver offers kernel SRQs (else creating one must fail with EOPNOTSUPP)");

/* Resizing kernel CQs is a project extension (spec §14); upstream has none. */
static bool kernel_resize_cq = true;
module_param(kernel_resize_cq, bool, 0444);
MODULE_PARM_DESC(kernel_resize_cq,
		 "the driver resizes kernel CQs (else ib_resize_cq must fail with EOPNOTSUPP)");

/* UC QPs are a project extension (spec §14); upstream has none. */
static bool kernel_uc = true;
module_param(kernel_uc, bool, 0444);
MODULE_PARM_DESC(kernel_uc,
		 "the driver offers UC QPs (else creating one must fail with EOPNOTSUPP)");

static bool loop;
module_param(loop, bool, 0444);
MODULE_PARM_DESC(loop,
		 "run SEND/WRITE/READ rounds on each device named ibdev until it is removed");

#define KT_PORT			1
#define KT_TIMEOUT_MS		2000
#define KT_QUIET_MS		300
#define KT_MAX_TIMEOUTS		3

/* Layout of each side's buffer. */
#define KT_BUF_SIZE		(64 * 1024)
#define KT_SEND_OFF		0		/* data we send / write */
#define KT_RECV_OFF		(8 * 1024)	/* receive buffers */
#define KT_RDMA_OFF		(16 * 1024)	/* fast-reg MR window */
#define KT_RDMA_LEN		(16 * 1024)
#define KT_LOCAL_OFF		(32 * 1024)	/* RDMA READ / atomic results */
#define KT_ATOMIC_OFF		4096		/* inside the MR window */
#define KT_MR_PAGES		8
#define KT_SENTINEL		0xEE

#define KT_WHY_LEN		160

#define KT_REMOTE_ACCESS						\
	(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |		\
	 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC)

struct kt_cq {
	struct ib_cq *cq;
	struct completion done;
	atomic_t events;
};

struct kt_side {
	const char *name;
	struct ib_device *dev;
	struct ib_pd *pd;
	struct kt_cq scq;
	struct kt_cq rcq;
	struct ib_qp *qp;
	struct ib_mr *mr;
	bool mr_valid;
	u8 *buf;
	dma_addr_t dma;
	int gid_index;
	union ib_gid gid;
	u8 mac[ETH_ALEN];
	u32 sq_psn;
};

static struct kt_side kt_a = { .name = "A", .sq_psn = 100 };
static struct kt_side kt_b = { .name = "B", .sq_psn = 200 };
static int kt_passed, kt_failed;
static int kt_timeouts;		/* consecutive completion timeouts */
static bool kt_dirty;		/* an error case left the QPs in ERR */
static bool kt_broken;		/* the QPs could not be reconnected */
static u8 kt_rnr_retry = 7;	/* A's rnr_retry at the next connect */

static void kt_report(const char *name, int ret, const char *why)
{
	if (!ret) {
		kt_passed++;
		if (!loop)	/* (rounds: thousands a second) */
			pr_info("ktest: PASS %s\n", name);
	} else {
		kt_failed++;
		pr_info("ktest: FAIL %s: %s\n", name, why);
	}
}

static __printf(2, 3) int kt_why(char *why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, KT_WHY_LEN, fmt, ap);
	va_end(ap);
	return -1;
}

static void kt_fill(u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (u8)(i * 7 + seed);
}

/* Return: -1 if all bytes match, else the first bad offset. */
static long kt_verify(const u8 *p, size_t len, u8 seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (u8)(i * 7 + seed))
			return i;
	return -1;
}

static long kt_verify_const(const u8 *p, size_t len, u8 val)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != val)
			return i;
	return -1;
}

/* -------------------------------------------------------------------- */
/* Completions */

static void kt_comp_handler(struct ib_cq *cq, void *ctx)
{
	struct kt_cq *c = ctx;

	atomic_inc(&c->events);
	complete(&c->done);
}

static void kt_cq_event(struct ib_event *ev, void *ctx)
{
	pr_info("ktest: CQ event %d\n", ev->event);
}

static void kt_qp_event(struct ib_event *ev, void *ctx)
{
	struct kt_side *s = ctx;

	pr_info("ktest: QP %s event %d\n", s->name, ev->event);
}

enum kt_mode { KT_POLL, KT_NOTIFY };

/*
 * Wait for one completion: by polling, or by arming the CQ (reporting
 * missed events) and sleeping until the completion handler runs.
 */
static int kt_wait_wc(struct kt_cq *c, struct ib_wc *wc, enum kt_mode mode)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(KT_TIMEOUT_MS);
	int n;

	for (;;) {
		n = ib_poll_cq(c->cq, 1, wc);
		if (n < 0)
			return n;
		if (n) {
			kt_timeouts = 0;
			return 0;
		}
		if (time_after(jiffies, deadline)) {
			kt_timeouts++;
			return -ETIMEDOUT;
		}
		if (mode == KT_NOTIFY) {
			reinit_completion(&c->done);
			n = ib_req_notify_cq(c->cq, IB_CQ_NEXT_COMP |
						     IB_CQ_REPORT_MISSED_EVENTS);
			if (n < 0)
				return n;
			if (!n && time_before(jiffies, deadline))
				wait_for_completion_timeout(&c->done,
							    deadline - jiffies);
		} else {
			usleep_range(100, 200);
		}
	}
}

/* What a completion must look like; -1 fields are not checked. */
struct kt_exp {
	enum ib_wc_status status;
	int opcode;
	u64 wr_id;
	struct ib_qp *qp;
	s64 byte_len;
	int flags;		/* exact value of the WITH_IMM/INV bits */
	__be32 imm;
	u32 inv_rkey;
	s64 src_qp;
};

#define KT_WC_CHECKED_FLAGS	(IB_WC_WITH_IMM | IB_WC_WITH_INVALIDATE)

static int kt_check_wc(const char *what, const struct ib_wc *wc,
		       const struct kt_exp *e, char *why)
{
	if (wc->status != e->status)
		return kt_why(why, "%s: status %s (%d), expected %s",
			      what, ib_wc_status_msg(wc->status), wc->status,
			      ib_wc_status_msg(e->status));
	if (wc->wr_id != e->wr_id)
		return kt_why(why, "%s: wr_id %#llx, expected %#llx", what,
			      wc->wr_id, e->wr_id);
	if (wc->qp != e->qp)
		return kt_why(why, "%s: qp_num %u, expected %u", what,
			      wc->qp ? wc->qp->qp_num : 0, e->qp->qp_num);
	/* Only status, wr_id and qp are valid in an error completion. */
	if (e->status != IB_WC_SUCCESS)
		return 0;
	if (e->opcode >= 0 && wc->opcode != e->opcode)
		return kt_why(why, "%s: opcode %d, expected %d", what,
			      wc->opcode, e->opcode);
	if (e->byte_len >= 0 && wc->byte_len != e->byte_len)
		return kt_why(why, "%s: byte_len %u, expected %lld", what,
			      wc->byte_len, e->byte_len);
	if ((wc->wc_flags & KT_WC_CHECKED_FLAGS) != e->flags)
		return kt_why(why, "%s: wc_flags %#x, expected IMM/INV bits %#x",
			      what, wc->wc_flags, e->flags);
	if ((e->flags & IB_WC_WITH_IMM) && wc->ex.imm_data != e->imm)
		return kt_why(why, "%s: imm_data %#x, expected %#x", what,
			      be32_to_cpu(wc->ex.imm_data),
			      be32_to_cpu(e->imm));
	if ((e->flags & IB_WC_WITH_INVALIDATE) &&
	    wc->ex.invalidate_rkey != e->inv_rkey)
		return kt_why(why, "%s: invalidate_rkey %#x, expected %#x",
			      what, wc->ex.invalidate_rkey, e->inv_rkey);
	if (e->src_qp >= 0 && wc->src_qp != e->src_qp)
		return kt_why(why, "%s: src_qp %u, expected %lld", what,
			      wc->src_qp, e->src_qp);
	return 0;
}

/* Wait for a completion on @c and check it. */
static int kt_expect(const char *what, struct kt_cq *c,
		     const struct kt_exp *e, enum kt_mode mode, char *why)
{
	struct ib_wc wc;
	int ret;

	ret = kt_wait_wc(c, &wc, mode);
	if (ret)
		return kt_why(why, "%s: no completion (%d)", what, ret);
	return kt_check_wc(what, &wc, e, why);
}

/* Expected send-side success completion of @s's WR @wr_id. */
static struct kt_exp kt_send_exp(struct kt_side *s, int opcode, u64 wr_id,
				 s64 byte_len)
{
	return (struct kt_exp){
		.status = IB_WC_SUCCESS, .opcode = opcode, .wr_id = wr_id,
		.qp = s->qp, .byte_len = byte_len, .src_qp = -1,
	};
}

static struct kt_exp kt_err_exp(struct kt_side *s, enum ib_wc_status st,
				u64 wr_id)
{
	return (struct kt_exp){
		.status = st, .opcode = -1, .wr_id = wr_id, .qp = s->qp,
		.byte_len = -1, .src_qp = -1,
	};
}

/* Drop whatever completions are (or soon will be) in @s's CQs. */
static void kt_drain(struct kt_side *s)
{
	unsigned long end = jiffies + msecs_to_jiffies(50);
	struct ib_wc wc;

	do {
		while (ib_poll_cq(s->scq.cq, 1, &wc) > 0)
			;
		while (ib_poll_cq(s->rcq.cq, 1, &wc) > 0)
			;
		usleep_range(1000, 2000);
	} while (time_before(jiffies, end));
}

/* -------------------------------------------------------------------- */
/* Posting */

static int kt_post_recv(struct kt_side *s, u64 wr_id, u32 off, u32 len)
{
	struct ib_sge sge = {
		.addr = s->dma + off,
		.length = len,
		.lkey = s->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
	};
	const struct ib_recv_wr *bad;

	return ib_post_recv(s->qp, &wr, &bad);
}

/* A SEND-family WR over s->buf[off, off + len). */
static int kt_post_send(struct kt_side *s, enum ib_wr_opcode op, u64 wr_id,
			u32 off, u32 len, int flags, u32 ex)
{
	struct ib_sge sge = {
		.addr = s->dma + off,
		.length = len,
		.lkey = s->pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
		.opcode = op,
		.send_flags = IB_SEND_SIGNALED | flags,
	};
	const struct ib_send_wr *bad;

	if (op == IB_WR_SEND_WITH_IMM)
		wr.ex.imm_data = cpu_to_be32(ex);
	else if (op == IB_WR_SEND_WITH_INV || op == IB_WR_LOCAL_INV)
		wr.ex.invalidate_rkey = ex;
	return ib_post_send(s->qp, &wr, &bad);
}

/* RDMA WRITE (WITH_IMM) / READ between s->buf[off] and @raddr. */
static int kt_post_rdma(struct kt_side *s, enum ib_wr_opcode op, u64 wr_id,
			u32 off, u32 len, u64 raddr, u32 rkey, u32 imm)
{
	struct ib_sge sge = {
		.addr = s->dma + off,
		.length = len,
		.lkey = s->pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = wr_id,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = op,
			.send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = raddr,
		.rkey = rkey,
	};
	const struct ib_send_wr *bad;

	if (op == IB_WR_RDMA_WRITE_WITH_IMM)
		wr.wr.ex.imm_data = cpu_to_be32(imm);
	return ib_post_send(s->qp, &wr.wr, &bad);
}

/* Atomic on @raddr; the original value lands in s->buf[off]. */
static int kt_post_atomic(struct kt_side *s, enum ib_wr_opcode op, u64 wr_id,
			  u32 off, u64 raddr, u32 rkey, u64 cmp_add, u64 swap)
{
	struct ib_sge sge = {
		.addr = s->dma + off,
		.length = sizeof(u64),
		.lkey = s->pd->local_dma_lkey,
	};
	struct ib_atomic_wr wr = {
		.wr = {
			.wr_id = wr_id,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = op,
			.send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = raddr,
		.compare_add = cmp_add,
		.swap = swap,
		.rkey = rkey,
	};
	const struct ib_send_wr *bad;

	return ib_post_send(s->qp, &wr.wr, &bad);
}

/*
 * Fast-register @s's MR over its RDMA window with a fresh key (REG_MR),
 * remote read/write/atomic, and wait for the REG_MR completion.
 */
static int kt_reg_mr(struct kt_side *s, char *why)
{
	struct scatterlist sg;
	struct ib_reg_wr wr = {};
	const struct ib_send_wr *bad;
	struct kt_exp e;
	int n, ret;

	sg_init_table(&sg, 1);
	sg_dma_address(&sg) = s->dma + KT_RDMA_OFF;
	sg_dma_len(&sg) = KT_RDMA_LEN;

	ib_update_fast_reg_key(s->mr, ib_inc_rkey(s->mr->rkey) & 0xff);
	n = ib_map_mr_sg(s->mr, &sg, 1, NULL, PAGE_SIZE);
	if (n != 1)
		return kt_why(why, "ib_map_mr_sg: %d", n);
	if (s->mr->iova != s->dma + KT_RDMA_OFF ||
	    s->mr->length != KT_RDMA_LEN)
		return kt_why(why, "mapped iova %#llx length %llu",
			      s->mr->iova, s->mr->length);

	wr.wr.opcode = IB_WR_REG_MR;
	wr.wr.wr_id = 0x7e9;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.mr = s->mr;
	wr.key = s->mr->rkey;
	wr.access = KT_REMOTE_ACCESS;
	ret = ib_post_send(s->qp, &wr.wr, &bad);
	if (ret)
		return kt_why(why, "post REG_MR: %d", ret);
	e = kt_send_exp(s, IB_WC_REG_MR, 0x7e9, -1);
	if (kt_expect("REG_MR", &s->scq, &e, KT_POLL, why))
		return -1;
	s->mr_valid = true;
	return 0;
}

static int kt_need_mr(struct kt_side *s, char *why)
{
	return s->mr_valid ? 0 : kt_reg_mr(s, why);
}

/* LOCAL_INV of @s's MR; a valid MR cannot be registered again. */
static int kt_local_inv(struct kt_side *s, u64 wr_id, char *why)
{
	struct kt_exp e;
	int ret;

	ret = kt_post_send(s, IB_WR_LOCAL_INV, wr_id, 0, 0, 0, s->mr->rkey);
	if (ret)
		return kt_why(why, "post LOCAL_INV: %d", ret);
	s->mr_valid = false;
	e = kt_send_exp(s, IB_WC_LOCAL_INV, wr_id, -1);
	return kt_expect("LOCAL_INV", &s->scq, &e, KT_POLL, why);
}

/* -------------------------------------------------------------------- */
/* Connection */

static int kt_modify(struct kt_side *s, struct ib_qp_attr *attr, int mask,
		     const char *step, char *why)
{
	int ret = ib_modify_qp(s->qp, attr, mask);

	if (ret)
		return kt_why(why, "QP %s to %s: %d", s->name, step, ret);
	return 0;
}

/* RESET -> INIT -> RTR -> RTS towards @peer. */
static int kt_connect_one(struct kt_side *s, struct kt_side *peer,
			  u8 rnr_retry, char *why)
{
	struct ib_qp_attr attr = {};

	attr.qp_state = IB_QPS_RESET;
	if (kt_modify(s, &attr, IB_QP_STATE, "RESET", why))
		return -1;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_INIT;
	attr.pkey_index = 0;
	attr.port_num = KT_PORT;
	attr.qp_access_flags = KT_REMOTE_ACCESS;
	if (kt_modify(s, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
		      IB_QP_ACCESS_FLAGS, "INIT", why))
		return -1;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = peer->qp->qp_num;
	attr.rq_psn = peer->sq_psn;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 1;
	attr.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr.ah_attr, KT_PORT);
	rdma_ah_set_grh(&attr.ah_attr, &peer->gid, 0, s->gid_index, 64, 0);
	memcpy(attr.ah_attr.roce.dmac, peer->mac, ETH_ALEN);
	if (kt_modify(s, &attr, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
		      IB_QP_DEST_QPN | IB_QP_RQ_PSN |
		      IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER,
		      "RTR", why))
		return -1;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = rnr_retry;
	attr.sq_psn = s->sq_psn;
	attr.max_rd_atomic = 1;
	return kt_modify(s, &attr, IB_QP_STATE | IB_QP_TIMEOUT |
			 IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_SQ_PSN |
			 IB_QP_MAX_QP_RD_ATOMIC, "RTS", why);
}

static int kt_connect(char *why)
{
	if (kt_connect_one(&kt_a, &kt_b, kt_rnr_retry, why) ||
	    kt_connect_one(&kt_b, &kt_a, 7, why))
		return -1;
	return 0;
}

/* After an error case: ERR, drop completions, RESET and reconnect. */
static void kt_reconnect(void)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	char why[KT_WHY_LEN];
	int ret;

	ib_modify_qp(kt_a.qp, &attr, IB_QP_STATE);
	ib_modify_qp(kt_b.qp, &attr, IB_QP_STATE);
	kt_drain(&kt_a);
	kt_drain(&kt_b);
	ret = kt_connect(why);
	if (ret) {
		kt_broken = true;
		kt_report("reconnect", ret, why);
	}
	kt_dirty = false;
}

/* -------------------------------------------------------------------- */
/* Data path checks */

typedef int (*kt_test_fn)(char *why);

static void kt_run(const char *name, kt_test_fn fn)
{
	char why[KT_WHY_LEN] = "";
	int ret;

	if (kt_broken) {
		kt_report(name, -1, "not run: the QPs could not be connected");
		return;
	}
	if (kt_timeouts >= KT_MAX_TIMEOUTS) {
		kt_report(name, -1,
			  "not run: the device produced no completions for the last checks");
		return;
	}
	ret = fn(why);
	kt_report(name, ret, why);
	if (ret || kt_dirty)
		kt_reconnect();
}

static int kt_test_send(char *why)
{
	struct kt_exp e;
	long bad;
	int ret;

	kt_fill(kt_a.buf + KT_SEND_OFF, 1000, 1);
	memset(kt_b.buf + KT_RECV_OFF, KT_SENTINEL, 2048);
	ret = kt_post_recv(&kt_b, 0x100, KT_RECV_OFF, 2048);
	if (ret)
		return kt_why(why, "post_recv: %d", ret);
	ret = kt_post_send(&kt_a, IB_WR_SEND, 0x200, KT_SEND_OFF, 1000, 0, 0);
	if (ret)
		return kt_why(why, "post_send: %d", ret);

	e = kt_send_exp(&kt_a, IB_WC_SEND, 0x200, -1);
	if (kt_expect("send", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	e = (struct kt_exp){ .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
			     .wr_id = 0x100, .qp = kt_b.qp, .byte_len = 1000,
			     .src_qp = kt_a.qp->qp_num };
	if (kt_expect("recv", &kt_b.rcq, &e, KT_POLL, why))
		return -1;

	bad = kt_verify(kt_b.buf + KT_RECV_OFF, 1000, 1);
	if (bad >= 0)
		return kt_why(why, "received data differs at byte %ld", bad);
	bad = kt_verify_const(kt_b.buf + KT_RECV_OFF + 1000, 1048,
			      KT_SENTINEL);
	if (bad >= 0)
		return kt_why(why, "receive buffer written past the message at byte %ld",
			      1000 + bad);
	return 0;
}

static int kt_test_send_with_imm(char *why)
{
	struct kt_exp e;
	long bad;
	int ret;

	kt_fill(kt_a.buf + KT_SEND_OFF, 333, 2);
	ret = kt_post_recv(&kt_b, 0x101, KT_RECV_OFF, 1024);
	if (ret)
		return kt_why(why, "post_recv: %d", ret);
	ret = kt_post_send(&kt_a, IB_WR_SEND_WITH_IMM, 0x201, KT_SEND_OFF,
			   333, 0, 0x12345678);
	if (ret)
		return kt_why(why, "post_send: %d", ret);

	e = kt_send_exp(&kt_a, IB_WC_SEND, 0x201, -1);
	if (kt_expect("send", &kt_a.scq, &e, KT_NOTIFY, why))
		return -1;
	e = (struct kt_exp){ .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
			     .wr_id = 0x101, .qp = kt_b.qp, .byte_len = 333,
			     .flags = IB_WC_WITH_IMM,
			     .imm = cpu_to_be32(0x12345678),
			     .src_qp = kt_a.qp->qp_num };
	if (kt_expect("recv", &kt_b.rcq, &e, KT_NOTIFY, why))
		return -1;
	bad = kt_verify(kt_b.buf + KT_RECV_OFF, 333, 2);
	if (bad >= 0)
		return kt_why(why, "received data differs at byte %ld", bad);
	return 0;
}

/* ARM_SOL: an unsolicited completion must not call the handler. */
static int kt_test_notify_solicited(char *why)
{
	struct kt_cq *c = &kt_b.rcq;
	struct kt_exp e;
	int ret, events;

	ret = kt_post_recv(&kt_b, 0x102, KT_RECV_OFF, 1024) ||
	      kt_post_recv(&kt_b, 0x103, KT_RECV_OFF + 1024, 1024);
	if (ret)
		return kt_why(why, "post_recv failed");

	reinit_completion(&c->done);
	ret = ib_req_notify_cq(c->cq, IB_CQ_SOLICITED);
	if (ret)
		return kt_why(why, "req_notify_cq(SOLICITED): %d", ret);
	events = atomic_read(&c->events);

	ret = kt_post_send(&kt_a, IB_WR_SEND, 0x202, KT_SEND_OFF, 64, 0, 0);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_send_exp(&kt_a, IB_WC_SEND, 0x202, -1);
	if (kt_expect("unsolicited send", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	msleep(KT_QUIET_MS);
	if (atomic_read(&c->events) != events)
		return kt_why(why, "handler called for an unsolicited completion");
	e = (struct kt_exp){ .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
			     .wr_id = 0x102, .qp = kt_b.qp, .byte_len = 64,
			     .src_qp = kt_a.qp->qp_num };
	if (kt_expect("unsolicited recv", c, &e, KT_POLL, why))
		return -1;

	ret = kt_post_send(&kt_a, IB_WR_SEND, 0x203, KT_SEND_OFF, 65,
			   IB_SEND_SOLICITED, 0);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	if (!wait_for_completion_timeout(&c->done,
					 msecs_to_jiffies(KT_TIMEOUT_MS)))
		return kt_why(why, "no handler call for a solicited completion");
	e.wr_id = 0x103;
	e.byte_len = 65;
	if (kt_expect("solicited recv", c, &e, KT_POLL, why))
		return -1;
	e = kt_send_exp(&kt_a, IB_WC_SEND, 0x203, -1);
	return kt_expect("solicited send", &kt_a.scq, &e, KT_POLL, why);
}

/* REPORT_MISSED_EVENTS says so when a completion is already queued. */
static int kt_test_notify_missed(char *why)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(KT_TIMEOUT_MS);
	struct kt_exp e;
	int ret;

	ret = kt_post_recv(&kt_b, 0x104, KT_RECV_OFF, 1024);
	if (ret)
		return kt_why(why, "post_recv: %d", ret);
	ret = kt_post_send(&kt_a, IB_WR_SEND, 0x204, KT_SEND_OFF, 16, 0, 0);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_send_exp(&kt_a, IB_WC_SEND, 0x204, -1);
	if (kt_expect("send", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	do {
		ret = ib_req_notify_cq(kt_b.rcq.cq, IB_CQ_NEXT_COMP |
					  IB_CQ_REPORT_MISSED_EVENTS);
		if (ret < 0)
			return kt_why(why, "req_notify_cq: %d", ret);
		if (ret > 0)
			break;
		usleep_range(500, 1000);
	} while (time_before(jiffies, deadline));
	if (!ret)
		return kt_why(why, "a queued completion was not reported as missed");
	e = (struct kt_exp){ .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
			     .wr_id = 0x104, .qp = kt_b.qp, .byte_len = 16,
			     .src_qp = kt_a.qp->qp_num };
	return kt_expect("recv", &kt_b.rcq, &e, KT_POLL, why);
}

static int kt_test_reg_mr(char *why)
{
	return kt_reg_mr(&kt_b, why);
}

static int kt_test_rdma_write(char *why)
{
	u8 *dst = kt_b.buf + KT_RDMA_OFF;
	struct kt_exp e;
	long bad;
	int ret;

	if (kt_need_mr(&kt_b, why))
		return -1;
	kt_fill(kt_a.buf + KT_SEND_OFF, 3000, 3);
	memset(dst, KT_SENTINEL, 3200);
	ret = kt_post_rdma(&kt_a, IB_WR_RDMA_WRITE, 0x205, KT_SEND_OFF, 3000,
			   kt_b.mr->iova + 100, kt_b.mr->rkey, 0);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_send_exp(&kt_a, IB_WC_RDMA_WRITE, 0x205, -1);
	if (kt_expect("write", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	bad = kt_verify(dst + 100, 3000, 3);
	if (bad >= 0)
		return kt_why(why, "written data differs at byte %ld", bad);
	if (kt_verify_const(dst, 100, KT_SENTINEL) >= 0 ||
	    kt_verify_const(dst + 3100, 100, KT_SENTINEL) >= 0)
		return kt_why(why, "bytes outside the target were written");
	return 0;
}

static int kt_test_rdma_write_with_imm(char *why)
{
	u8 *dst = kt_b.buf + KT_RDMA_OFF;
	struct kt_exp e;
	long bad;
	int ret;

	if (kt_need_mr(&kt_b, why))
		return -1;
	kt_fill(kt_a.buf + KT_SEND_OFF, 512, 4);
	memset(dst, KT_SENTINEL, 512);
	/* The immediate consumes a receive WQE; no SGE is needed. */
	ret = kt_post_recv(&kt_b, 0x105, 0, 0);
	if (ret)
		return kt_why(why, "post_recv: %d", ret);
	ret = kt_post_rdma(&kt_a, IB_WR_RDMA_WRITE_WITH_IMM, 0x206,
			   KT_SEND_OFF, 512, kt_b.mr->iova, kt_b.mr->rkey,
			   0xcafe0001);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_send_exp(&kt_a, IB_WC_RDMA_WRITE, 0x206, -1);
	if (kt_expect("write", &kt_a.scq, &e, KT_NOTIFY, why))
		return -1;
	e = (struct kt_exp){ .status = IB_WC_SUCCESS,
			     .opcode = IB_WC_RECV_RDMA_WITH_IMM,
			     .wr_id = 0x105, .qp = kt_b.qp, .byte_len = 512,
			     .flags = IB_WC_WITH_IMM,
			     .imm = cpu_to_be32(0xcafe0001),
			     .src_qp = kt_a.qp->qp_num };
	if (kt_expect("recv", &kt_b.rcq, &e, KT_NOTIFY, why))
		return -1;
	bad = kt_verify(dst, 512, 4);
	if (bad >= 0)
		return kt_why(why, "written data differs at byte %ld", bad);
	return 0;
}

static int kt_test_rdma_read(char *why)
{
	u8 *dst = kt_a.buf + KT_LOCAL_OFF;
	struct kt_exp e;
	long bad;
	int ret;

	if (kt_need_mr(&kt_b, why))
		return -1;
	kt_fill(kt_b.buf + KT_RDMA_OFF + 200, 2500, 5);
	memset(dst, KT_SENTINEL, 2600);
	ret = kt_post_rdma(&kt_a, IB_WR_RDMA_READ, 0x207, KT_LOCAL_OFF, 2500,
			   kt_b.mr->iova + 200, kt_b.mr->rkey, 0);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_send_exp(&kt_a, IB_WC_RDMA_READ, 0x207, 2500);
	if (kt_expect("read", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	bad = kt_verify(dst, 2500, 5);
	if (bad >= 0)
		return kt_why(why, "read data differs at byte %ld", bad);
	if (kt_verify_const(dst + 2500, 100, KT_SENTINEL) >= 0)
		return kt_why(why, "bytes past the read length were written");
	return 0;
}

static u64 *kt_b_atomic(void)
{
	return (u64 *)(kt_b.buf + KT_RDMA_OFF + KT_ATOMIC_OFF);
}

static u64 *kt_a_result(void)
{
	return (u64 *)(kt_a.buf + KT_LOCAL_OFF);
}

static int kt_atomic(enum ib_wr_opcode op, u64 wr_id, u64 cmp_add, u64 swap,
		     char *why)
{
	int opcode = op == IB_WR_ATOMIC_CMP_AND_SWP ? IB_WC_COMP_SWAP :
						      IB_WC_FETCH_ADD;
	struct kt_exp e;
	int ret;

	*kt_a_result() = 0xdeaddeaddeaddeadULL;
	ret = kt_post_atomic(&kt_a, op, wr_id, KT_LOCAL_OFF,
			     kt_b.mr->iova + KT_ATOMIC_OFF, kt_b.mr->rkey,
			     cmp_add, swap);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_send_exp(&kt_a, opcode, wr_id, sizeof(u64));
	return kt_expect("atomic", &kt_a.scq, &e, KT_POLL, why);
}

static int kt_test_cmp_and_swp(char *why)
{
	const u64 old = 0x1111222233334444ULL, new = 0xaaaabbbbccccddddULL;

	if (kt_need_mr(&kt_b, why))
		return -1;
	*kt_b_atomic() = old;
	if (kt_atomic(IB_WR_ATOMIC_CMP_AND_SWP, 0x208, old, new, why))
		return -1;
	if (*kt_a_result() != old)
		return kt_why(why, "returned %#llx, expected %#llx",
			      *kt_a_result(), old);
	if (*kt_b_atomic() != new)
		return kt_why(why, "target is %#llx, expected %#llx",
			      *kt_b_atomic(), new);

	/* A compare that does not match leaves the target alone. */
	if (kt_atomic(IB_WR_ATOMIC_CMP_AND_SWP, 0x209, old, 42, why))
		return -1;
	if (*kt_a_result() != new || *kt_b_atomic() != new)
		return kt_why(why, "mismatching compare: returned %#llx, target %#llx",
			      *kt_a_result(), *kt_b_atomic());
	return 0;
}

static int kt_test_fetch_and_add(char *why)
{
	if (kt_need_mr(&kt_b, why))
		return -1;
	*kt_b_atomic() = 1000;
	if (kt_atomic(IB_WR_ATOMIC_FETCH_AND_ADD, 0x20a, 234, 0, why))
		return -1;
	if (*kt_a_result() != 1000 || *kt_b_atomic() != 1234)
		return kt_why(why, "returned %llu, target %llu (expected 1000, 1234)",
			      *kt_a_result(), *kt_b_atomic());
	return 0;
}

/* A new key from REG_MR works for WRITE and READ; the old one does not. */
static int kt_test_reg_mr_rdma(char *why)
{
	u8 *back = kt_a.buf + KT_LOCAL_OFF;
	struct kt_exp e;
	u32 old_rkey;
	int ret;

	if (kt_need_mr(&kt_b, why))
		return -1;
	old_rkey = kt_b.mr->rkey;
	if (kt_local_inv(&kt_b, 0x301, why) || kt_reg_mr(&kt_b, why))
		return -1;
	if (kt_b.mr->rkey == old_rkey)
		return kt_why(why, "the key did not change");

	kt_fill(kt_a.buf + KT_SEND_OFF, 1024, 6);
	memset(back, 0, 1024);
	ret = kt_post_rdma(&kt_a, IB_WR_RDMA_WRITE, 0x20b, KT_SEND_OFF, 1024,
			   kt_b.mr->iova + 8192, kt_b.mr->rkey, 0);
	if (ret)
		return kt_why(why, "post write: %d", ret);
	e = kt_send_exp(&kt_a, IB_WC_RDMA_WRITE, 0x20b, -1);
	if (kt_expect("write", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	ret = kt_post_rdma(&kt_a, IB_WR_RDMA_READ, 0x20c, KT_LOCAL_OFF, 1024,
			   kt_b.mr->iova + 8192, kt_b.mr->rkey, 0);
	if (ret)
		return kt_why(why, "post read: %d", ret);
	e = kt_send_exp(&kt_a, IB_WC_RDMA_READ, 0x20c, 1024);
	if (kt_expect("read", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	if (kt_verify(back, 1024, 6) >= 0 ||
	    kt_verify(kt_b.buf + KT_RDMA_OFF + 8192, 1024, 6) >= 0)
		return kt_why(why, "data through the new key differs");

	kt_dirty = true;
	ret = kt_post_rdma(&kt_a, IB_WR_RDMA_WRITE, 0x20d, KT_SEND_OFF, 8,
			   kt_b.mr->iova, old_rkey, 0);
	if (ret)
		return kt_why(why, "post write (old key): %d", ret);
	e = kt_err_exp(&kt_a, IB_WC_REM_ACCESS_ERR, 0x20d);
	return kt_expect("write with the old key", &kt_a.scq, &e, KT_POLL,
			 why);
}

static int kt_test_local_inv(char *why)
{
	if (kt_need_mr(&kt_b, why))
		return -1;
	return kt_local_inv(&kt_b, 0x300, why);
}

/* After an invalidation, remote access through the key fails. */
static int kt_test_invalidated_write(char *why)
{
	struct kt_exp e;
	int ret;

	kt_dirty = true;
	ret = kt_post_rdma(&kt_a, IB_WR_RDMA_WRITE, 0x20e, KT_SEND_OFF, 64,
			   kt_b.mr->iova, kt_b.mr->rkey, 0);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_err_exp(&kt_a, IB_WC_REM_ACCESS_ERR, 0x20e);
	return kt_expect("write", &kt_a.scq, &e, KT_POLL, why);
}

static int kt_test_send_with_inv(char *why)
{
	struct kt_exp e;
	u32 rkey;
	int ret;

	if (kt_need_mr(&kt_b, why))
		return -1;
	rkey = kt_b.mr->rkey;
	kt_fill(kt_a.buf + KT_SEND_OFF, 256, 7);
	ret = kt_post_recv(&kt_b, 0x106, KT_RECV_OFF, 1024);
	if (ret)
		return kt_why(why, "post_recv: %d", ret);
	ret = kt_post_send(&kt_a, IB_WR_SEND_WITH_INV, 0x20f, KT_SEND_OFF,
			   256, 0, rkey);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	kt_b.mr_valid = false;
	e = kt_send_exp(&kt_a, IB_WC_SEND, 0x20f, -1);
	if (kt_expect("send", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	e = (struct kt_exp){ .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
			     .wr_id = 0x106, .qp = kt_b.qp, .byte_len = 256,
			     .flags = IB_WC_WITH_INVALIDATE, .inv_rkey = rkey,
			     .src_qp = kt_a.qp->qp_num };
	if (kt_expect("recv", &kt_b.rcq, &e, KT_POLL, why))
		return -1;
	if (kt_verify(kt_b.buf + KT_RECV_OFF, 256, 7) >= 0)
		return kt_why(why, "received data differs");
	return 0;
}

/*
 * ib_resize_cq of A's send CQ with three completions pending: they come
 * out after the resize, in order, and the CQ goes on; a size below what
 * is pending is refused.
 */
static int kt_test_resize_cq(char *why)
{
	struct ib_cq *cq = kt_a.scq.cq;
	int i, want = cq->cqe * 2, ret;
	struct kt_exp e;

	if (!kernel_resize_cq) {
		ret = ib_resize_cq(cq, want);
		if (ret != -EOPNOTSUPP)
			return kt_why(why, "ib_resize_cq: %d, not -EOPNOTSUPP",
				      ret);
		return 0;
	}
	kt_fill(kt_a.buf + KT_SEND_OFF, 64, 9);
	for (i = 0; i < 3; i++) {
		if (kt_post_recv(&kt_b, 0x700 + i, KT_RECV_OFF + i * 1024,
				 1024) ||
		    kt_post_send(&kt_a, IB_WR_SEND, 0x710 + i, KT_SEND_OFF, 64,
				 0, 0))
			return kt_why(why, "posting SEND %d failed", i);
		e = (struct kt_exp){ .status = IB_WC_SUCCESS,
				     .opcode = IB_WC_RECV, .wr_id = 0x700 + i,
				     .qp = kt_b.qp, .byte_len = 64,
				     .src_qp = kt_a.qp->qp_num };
		if (kt_expect("recv", &kt_b.rcq, &e, KT_POLL, why))
			return -1;
	}
	/* Three sends completed on A's CQ, none polled yet. */
	ret = ib_resize_cq(cq, 2);
	if (ret != -EINVAL)
		return kt_why(why, "ib_resize_cq to 2 with 3 pending: %d, not -EINVAL",
			      ret);
	ret = ib_resize_cq(cq, want);
	if (ret || cq->cqe < want)
		return kt_why(why, "ib_resize_cq to %d: %d (cqe %d)", want, ret,
			      cq->cqe);
	for (i = 0; i < 3; i++) {
		e = kt_send_exp(&kt_a, IB_WC_SEND, 0x710 + i, -1);
		if (kt_expect("send after the resize", &kt_a.scq, &e, KT_POLL,
			      why))
			return -1;
	}
	/* It goes on: a SEND completes on the new ring, via an event. */
	if (kt_post_recv(&kt_b, 0x703, KT_RECV_OFF, 1024) ||
	    kt_post_send(&kt_a, IB_WR_SEND, 0x713, KT_SEND_OFF, 64, 0, 0))
		return kt_why(why, "posting the last SEND failed");
	e = kt_send_exp(&kt_a, IB_WC_SEND, 0x713, -1);
	if (kt_expect("send on the new ring", &kt_a.scq, &e, KT_NOTIFY, why))
		return -1;
	e = (struct kt_exp){ .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
			     .wr_id = 0x703, .qp = kt_b.qp, .byte_len = 64,
			     .src_qp = kt_a.qp->qp_num };
	return kt_expect("recv", &kt_b.rcq, &e, KT_POLL, why);
}

static int kt_test_bad_lkey(char *why)
{
	struct ib_sge sge = {
		.addr = kt_a.dma + KT_SEND_OFF,
		.length = 128,
		.lkey = kt_a.pd->local_dma_lkey ^ 0x5a5a5a00,
	};
	struct ib_send_wr wr = {
		.wr_id = 0x210,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};
	const struct ib_send_wr *bad;
	struct kt_exp e;
	int ret;

	kt_dirty = true;
	ret = kt_post_recv(&kt_b, 0x107, KT_RECV_OFF, 1024);
	if (ret)
		return kt_why(why, "post_recv: %d", ret);
	ret = ib_post_send(kt_a.qp, &wr, &bad);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_err_exp(&kt_a, IB_WC_LOC_PROT_ERR, 0x210);
	return kt_expect("send", &kt_a.scq, &e, KT_POLL, why);
}

static int kt_test_bad_rkey(char *why)
{
	struct kt_exp e;
	int ret;

	if (kt_need_mr(&kt_b, why))
		return -1;
	kt_dirty = true;
	ret = kt_post_rdma(&kt_a, IB_WR_RDMA_WRITE, 0x211, KT_SEND_OFF, 64,
			   kt_b.mr->iova, kt_b.mr->rkey ^ 0x5a5a5a00, 0);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_err_exp(&kt_a, IB_WC_REM_ACCESS_ERR, 0x211);
	return kt_expect("write", &kt_a.scq, &e, KT_POLL, why);
}

static int kt_test_short_recv(char *why)
{
	struct kt_exp e;
	int ret;

	kt_dirty = true;
	ret = kt_post_recv(&kt_b, 0x108, KT_RECV_OFF, 64);
	if (ret)
		return kt_why(why, "post_recv: %d", ret);
	ret = kt_post_send(&kt_a, IB_WR_SEND, 0x212, KT_SEND_OFF, 1000, 0, 0);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_err_exp(&kt_b, IB_WC_LOC_LEN_ERR, 0x108);
	if (kt_expect("recv", &kt_b.rcq, &e, KT_POLL, why))
		return -1;
	e = kt_err_exp(&kt_a, IB_WC_REM_INV_REQ_ERR, 0x212);
	return kt_expect("send", &kt_a.scq, &e, KT_POLL, why);
}

/* No receive posted and rnr_retry 0: the first RNR NAK is fatal. */
static int kt_test_rnr(char *why)
{
	struct kt_exp e;
	int ret;

	kt_dirty = true;
	kt_rnr_retry = 0;
	ret = kt_connect(why);
	kt_rnr_retry = 7;
	if (ret)
		return -1;
	ret = kt_post_send(&kt_a, IB_WR_SEND, 0x213, KT_SEND_OFF, 32, 0, 0);
	if (ret)
		return kt_why(why, "post_send: %d", ret);
	e = kt_err_exp(&kt_a, IB_WC_RNR_RETRY_EXC_ERR, 0x213);
	return kt_expect("send", &kt_a.scq, &e, KT_POLL, why);
}

/* A QP moved to ERR flushes its posted and newly posted WRs. */
static int kt_test_flush(char *why)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	struct kt_exp e;
	int ret;

	kt_dirty = true;
	ret = kt_post_recv(&kt_b, 0x109, KT_RECV_OFF, 256) ||
	      kt_post_recv(&kt_b, 0x10a, KT_RECV_OFF + 256, 256);
	if (ret)
		return kt_why(why, "post_recv failed");
	if (kt_modify(&kt_b, &attr, IB_QP_STATE, "ERR", why))
		return -1;
	e = kt_err_exp(&kt_b, IB_WC_WR_FLUSH_ERR, 0x109);
	if (kt_expect("first recv", &kt_b.rcq, &e, KT_NOTIFY, why))
		return -1;
	e.wr_id = 0x10a;
	if (kt_expect("second recv", &kt_b.rcq, &e, KT_POLL, why))
		return -1;

	if (kt_modify(&kt_a, &attr, IB_QP_STATE, "ERR", why))
		return -1;
	ret = kt_post_send(&kt_a, IB_WR_SEND, 0x214, KT_SEND_OFF, 32, 0, 0);
	if (ret)
		return kt_why(why, "post_send in ERR: %d", ret);
	e = kt_err_exp(&kt_a, IB_WC_WR_FLUSH_ERR, 0x214);
	return kt_expect("send", &kt_a.scq, &e, KT_POLL, why);
}

/* -------------------------------------------------------------------- */
/* Control path checks (no data movement) */

static int kt_check_query_qp(char *why)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr attr;
	int ret;

	ret = ib_query_qp(kt_a.qp, &attr, IB_QP_STATE | IB_QP_DEST_QPN |
			  IB_QP_PATH_MTU | IB_QP_AV | IB_QP_ACCESS_FLAGS,
			  &init);
	if (ret)
		return kt_why(why, "ib_query_qp: %d", ret);
	if (attr.qp_state != IB_QPS_RTS)
		return kt_why(why, "state %d, expected RTS", attr.qp_state);
	if (attr.dest_qp_num != kt_b.qp->qp_num)
		return kt_why(why, "dest_qp_num %u, expected %u",
			      attr.dest_qp_num, kt_b.qp->qp_num);
	if (attr.path_mtu != IB_MTU_1024)
		return kt_why(why, "path_mtu %d, expected %d", attr.path_mtu,
			      IB_MTU_1024);
	if (attr.qp_access_flags != KT_REMOTE_ACCESS)
		return kt_why(why, "access %#x, expected %#x",
			      attr.qp_access_flags, KT_REMOTE_ACCESS);
	if (!(rdma_ah_get_ah_flags(&attr.ah_attr) & IB_AH_GRH) ||
	    memcmp(rdma_ah_read_grh(&attr.ah_attr)->dgid.raw, kt_b.gid.raw,
		   sizeof(kt_b.gid.raw)))
		return kt_why(why, "AV does not carry the peer's GID");
	if (init.qp_type != IB_QPT_RC || init.cap.max_send_wr < 32 ||
	    init.cap.max_recv_wr < 32)
		return kt_why(why, "init attributes: type %d, %u/%u WRs",
			      init.qp_type, init.cap.max_send_wr,
			      init.cap.max_recv_wr);
	return 0;
}

static int kt_check_bad_transition(char *why)
{
	struct ib_qp_init_attr init = {
		.send_cq = kt_a.scq.cq,
		.recv_cq = kt_a.rcq.cq,
		.qp_type = IB_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ib_qp_attr attr = { .qp_state = IB_QPS_RTS };
	struct ib_qp *qp;
	int ret;

	qp = ib_create_qp(kt_a.pd, &init);
	if (IS_ERR(qp))
		return kt_why(why, "ib_create_qp: %ld", PTR_ERR(qp));
	ret = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN);
	ib_destroy_qp(qp);
	if (ret != -EINVAL)
		return kt_why(why, "RESET -> RTS returned %d, expected %d",
			      ret, -EINVAL);
	return 0;
}

/* A UD QP goes to RTS, and an AH for the peer can be made. */
static int kt_check_ud(char *why)
{
	struct ib_qp_init_attr init = {
		.send_cq = kt_a.scq.cq,
		.recv_cq = kt_a.rcq.cq,
		.qp_type = IB_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct rdma_ah_attr ah_attr = { .type = RDMA_AH_ATTR_TYPE_ROCE };
	struct ib_qp_attr attr = {};
	struct ib_ah *ah;
	struct ib_qp *qp;
	int ret;

	qp = ib_create_qp(kt_a.pd, &init);
	if (IS_ERR(qp))
		return kt_why(why, "ib_create_qp: %ld", PTR_ERR(qp));

	attr.qp_state = IB_QPS_INIT;
	attr.port_num = KT_PORT;
	attr.qkey = 0x11111111;
	ret = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_QKEY);
	if (!ret) {
		attr.qp_state = IB_QPS_RTR;
		ret = ib_modify_qp(qp, &attr, IB_QP_STATE);
	}
	if (!ret) {
		attr.qp_state = IB_QPS_RTS;
		attr.sq_psn = 7;
		ret = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN);
	}
	if (ret) {
		ib_destroy_qp(qp);
		return kt_why(why, "UD QP to RTS: %d", ret);
	}

	rdma_ah_set_port_num(&ah_attr, KT_PORT);
	rdma_ah_set_grh(&ah_attr, &kt_b.gid, 0, kt_a.gid_index, 64, 0);
	memcpy(ah_attr.roce.dmac, kt_b.mac, ETH_ALEN);
	ah = rdma_create_ah(kt_a.pd, &ah_attr, RDMA_CREATE_AH_SLEEPABLE);
	ib_destroy_qp(qp);
	if (IS_ERR(ah))
		return kt_why(why, "rdma_create_ah: %ld", PTR_ERR(ah));
	rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
	return 0;
}

/* UC: RESET -> INIT -> RTR -> RTS towards @peer, UC's attributes only. */
static int kt_connect_uc(struct kt_side *s, struct kt_side *peer, char *why)
{
	struct ib_qp_attr attr = {};

	attr.qp_state = IB_QPS_INIT;
	attr.port_num = KT_PORT;
	attr.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	if (kt_modify(s, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
		      IB_QP_ACCESS_FLAGS, "INIT (UC)", why))
		return -1;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = peer->qp->qp_num;
	attr.rq_psn = peer->sq_psn;
	attr.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr.ah_attr, KT_PORT);
	rdma_ah_set_grh(&attr.ah_attr, &peer->gid, 0, s->gid_index, 64, 0);
	memcpy(attr.ah_attr.roce.dmac, peer->mac, ETH_ALEN);
	if (kt_modify(s, &attr, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
		      IB_QP_DEST_QPN | IB_QP_RQ_PSN, "RTR (UC)", why))
		return -1;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = s->sq_psn;
	return kt_modify(s, &attr, IB_QP_STATE | IB_QP_SQ_PSN, "RTS (UC)", why);
}

/* A UC QP of @s on its CQs. */
static struct ib_qp *kt_create_uc(struct kt_side *s)
{
	struct ib_qp_init_attr init = {
		.send_cq = s->scq.cq,
		.recv_cq = s->rcq.cq,
		.qp_type = IB_QPT_UC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.event_handler = kt_qp_event,
		.qp_context = s,
	};

	return ib_create_qp(s->pd, &init);
}

/*
 * Kernel UC QPs: a SEND and a zero-length WRITE_WITH_IMM arrive (data
 * checked); a SEND that finds no receive is lost and still completes
 * successfully at the sender, and the next one is the one received. The
 * sides' RC QPs stand aside meanwhile.
 */
static int kt_uc_traffic(char *why)
{
	struct kt_exp e;
	long bad;

	kt_fill(kt_a.buf + KT_SEND_OFF, 700, 31);
	memset(kt_b.buf + KT_RECV_OFF, KT_SENTINEL, 2048);
	if (kt_post_recv(&kt_b, 0x900, KT_RECV_OFF, 1024) ||
	    kt_post_send(&kt_a, IB_WR_SEND, 0x901, KT_SEND_OFF, 700, 0, 0))
		return kt_why(why, "UC: posting the SEND failed");
	e = kt_send_exp(&kt_a, IB_WC_SEND, 0x901, -1);
	if (kt_expect("UC send", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	e = (struct kt_exp){ .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
			     .wr_id = 0x900, .qp = kt_b.qp, .byte_len = 700,
			     .src_qp = kt_a.qp->qp_num };
	if (kt_expect("UC recv", &kt_b.rcq, &e, KT_POLL, why))
		return -1;
	bad = kt_verify(kt_b.buf + KT_RECV_OFF, 700, 31);
	if (bad >= 0)
		return kt_why(why, "UC: received data differs at byte %ld", bad);

	if (kt_post_recv(&kt_b, 0x902, KT_RECV_OFF, 1024) ||
	    kt_post_rdma(&kt_a, IB_WR_RDMA_WRITE_WITH_IMM, 0x903, KT_SEND_OFF,
			 0, 0, 0, 0xabcd))
		return kt_why(why, "UC: posting the WRITE_WITH_IMM failed");
	e = kt_send_exp(&kt_a, IB_WC_RDMA_WRITE, 0x903, -1);
	if (kt_expect("UC write_imm", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	e = (struct kt_exp){ .status = IB_WC_SUCCESS,
			     .opcode = IB_WC_RECV_RDMA_WITH_IMM,
			     .wr_id = 0x902, .qp = kt_b.qp, .byte_len = 0,
			     .flags = IB_WC_WITH_IMM,
			     .imm = cpu_to_be32(0xabcd),
			     .src_qp = kt_a.qp->qp_num };
	if (kt_expect("UC recv imm", &kt_b.rcq, &e, KT_POLL, why))
		return -1;

	/* No receive: lost, yet successful at the sender. */
	kt_fill(kt_a.buf + KT_SEND_OFF + 1024, 100, 32);
	if (kt_post_send(&kt_a, IB_WR_SEND, 0x904, KT_SEND_OFF, 200, 0, 0))
		return kt_why(why, "UC: posting the lost SEND failed");
	e = kt_send_exp(&kt_a, IB_WC_SEND, 0x904, -1);
	if (kt_expect("UC lost send", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	if (kt_post_recv(&kt_b, 0x905, KT_RECV_OFF, 1024) ||
	    kt_post_send(&kt_a, IB_WR_SEND, 0x906, KT_SEND_OFF + 1024, 100, 0,
			 0))
		return kt_why(why, "UC: posting the last SEND failed");
	e = kt_send_exp(&kt_a, IB_WC_SEND, 0x906, -1);
	if (kt_expect("UC last send", &kt_a.scq, &e, KT_POLL, why))
		return -1;
	e = (struct kt_exp){ .status = IB_WC_SUCCESS, .opcode = IB_WC_RECV,
			     .wr_id = 0x905, .qp = kt_b.qp, .byte_len = 100,
			     .src_qp = kt_a.qp->qp_num };
	if (kt_expect("UC recv after the loss", &kt_b.rcq, &e, KT_POLL, why))
		return -1;
	bad = kt_verify(kt_b.buf + KT_RECV_OFF, 100, 32);
	if (bad >= 0)
		return kt_why(why, "UC: the message after the loss differs at byte %ld",
			      bad);
	return 0;
}

static int kt_check_uc(char *why)
{
	struct ib_qp *rc_a = kt_a.qp, *rc_b = kt_b.qp, *ua, *ub;
	int ret;

	ua = kt_create_uc(&kt_a);
	if (!kernel_uc) {
		if (!IS_ERR(ua)) {
			ib_destroy_qp(ua);
			return kt_why(why, "ib_create_qp (UC) succeeded");
		}
		if (PTR_ERR(ua) != -EOPNOTSUPP)
			return kt_why(why, "ib_create_qp (UC): %ld, not -EOPNOTSUPP",
				      PTR_ERR(ua));
		return 0;
	}
	if (IS_ERR(ua))
		return kt_why(why, "ib_create_qp (UC): %ld", PTR_ERR(ua));
	ub = kt_create_uc(&kt_b);
	if (IS_ERR(ub)) {
		ib_destroy_qp(ua);
		return kt_why(why, "ib_create_qp (UC) on B: %ld", PTR_ERR(ub));
	}
	kt_a.qp = ua;
	kt_b.qp = ub;
	ret = kt_connect_uc(&kt_a, &kt_b, why);
	if (!ret)
		ret = kt_connect_uc(&kt_b, &kt_a, why);
	if (!ret)
		ret = kt_uc_traffic(why);
	kt_a.qp = rc_a;
	kt_b.qp = rc_b;
	ib_destroy_qp(ua);
	ib_destroy_qp(ub);
	/* Nothing of the UC QPs may be left for the RC checks. */
	kt_drain(&kt_a);
	kt_drain(&kt_b);
	return ret;
}

static int kt_check_srq(char *why)
{
	struct ib_srq_init_attr sinit = {
		.srq_type = IB_SRQT_BASIC,
		.attr = { .max_wr = 16, .max_sge = 1 },
	};
	struct ib_qp_init_attr init = {
		.send_cq = kt_a.scq.cq,
		.recv_cq = kt_a.rcq.cq,
		.qp_type = IB_QPT_RC,
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
	};
	struct ib_srq_attr attr = { .srq_limit = 4 };
	struct ib_srq *srq;
	struct ib_qp *qp;
	int ret;

	srq = ib_create_srq(kt_a.pd, &sinit);
	if (!kernel_srq) {
		if (!IS_ERR(srq)) {
			ib_destroy_srq(srq);
			return kt_why(why, "ib_create_srq succeeded");
		}
		if (PTR_ERR(srq) != -EOPNOTSUPP)
			return kt_why(why, "ib_create_srq: %ld, not -EOPNOTSUPP",
				      PTR_ERR(srq));
		return 0;
	}
	if (IS_ERR(srq))
		return kt_why(why, "ib_create_srq: %ld", PTR_ERR(srq));
	ret = ib_modify_srq(srq, &attr, IB_SRQ_LIMIT);
	if (ret) {
		kt_why(why, "ib_modify_srq: %d", ret);
		goto out;
	}
	memset(&attr, 0, sizeof(attr));
	ret = ib_query_srq(srq, &attr);
	if (ret || attr.max_wr < 16 || attr.srq_limit != 4) {
		kt_why(why, "ib_query_srq: %d, max_wr %u, limit %u", ret,
		       attr.max_wr, attr.srq_limit);
		ret = -1;
		goto out;
	}
	init.srq = srq;
	qp = ib_create_qp(kt_a.pd, &init);
	if (IS_ERR(qp)) {
		ret = kt_why(why, "ib_create_qp with SRQ: %ld", PTR_ERR(qp));
		goto out;
	}
	ib_destroy_qp(qp);
out:
	ib_destroy_srq(srq);
	return ret;
}

/* -------------------------------------------------------------------- */
/* Setup and teardown */

/* Prefer a RoCE v2 GID; else index 0. */
static int kt_pick_gid(struct kt_side *s, char *why)
{
	const struct ib_gid_attr *attr = NULL, *a;
	unsigned int i, len = s->dev->port_data[KT_PORT].immutable.gid_tbl_len;
	u16 vlan;
	int ret;

	for (i = 0; i < len; i++) {
		a = rdma_get_gid_attr(s->dev, KT_PORT, i);
		if (IS_ERR(a))
			continue;
		if (a->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP) {
			attr = a;
			break;
		}
		rdma_put_gid_attr(a);
	}
	if (!attr)
		attr = rdma_get_gid_attr(s->dev, KT_PORT, 0);
	if (IS_ERR(attr))
		return kt_why(why, "%s: no GID at index 0 (%ld)",
			      dev_name(&s->dev->dev), PTR_ERR(attr));
	s->gid_index = attr->index;
	s->gid = attr->gid;
	ret = rdma_read_gid_l2_fields(attr, &vlan, s->mac);
	rdma_put_gid_attr(attr);
	if (ret)
		return kt_why(why, "%s: GID %d has no netdev (%d)",
			      dev_name(&s->dev->dev), s->gid_index, ret);
	return 0;
}

static int kt_create_cq(struct kt_side *s, struct kt_cq *c, char *why)
{
	struct ib_cq_init_attr attr = { .cqe = 64 };

	init_completion(&c->done);
	atomic_set(&c->events, 0);
	c->cq = ib_create_cq(s->dev, kt_comp_handler, kt_cq_event, c, &attr);
	if (IS_ERR(c->cq)) {
		int ret = PTR_ERR(c->cq);

		c->cq = NULL;
		return kt_why(why, "ib_create_cq: %d", ret);
	}
	return 0;
}

static void kt_side_fini(struct kt_side *s)
{
	if (s->qp)
		ib_destroy_qp(s->qp);
	if (s->mr)
		ib_dereg_mr(s->mr);
	if (s->rcq.cq)
		ib_destroy_cq(s->rcq.cq);
	if (s->scq.cq)
		ib_destroy_cq(s->scq.cq);
	if (s->pd)
		ib_dealloc_pd(s->pd);
	if (s->buf)
		dma_free_coherent(s->dev->dma_device, KT_BUF_SIZE, s->buf,
				  s->dma);
	s->qp = NULL;
	s->mr = NULL;
	s->rcq.cq = NULL;
	s->scq.cq = NULL;
	s->pd = NULL;
	s->buf = NULL;
}

static int kt_side_init(struct kt_side *s, char *why)
{
	struct ib_qp_init_attr init = {
		.event_handler = kt_qp_event,
		.qp_context = s,
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = { .max_send_wr = 32, .max_recv_wr = 32,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	if (kt_pick_gid(s, why))
		return -1;

	s->buf = dma_alloc_coherent(s->dev->dma_device, KT_BUF_SIZE, &s->dma,
				    GFP_KERNEL);
	if (!s->buf)
		return kt_why(why, "no DMA buffer");

	s->pd = ib_alloc_pd(s->dev, 0);
	if (IS_ERR(s->pd)) {
		int ret = PTR_ERR(s->pd);

		s->pd = NULL;
		return kt_why(why, "ib_alloc_pd: %d", ret);
	}
	if (kt_create_cq(s, &s->scq, why) || kt_create_cq(s, &s->rcq, why))
		return -1;

	s->mr = ib_alloc_mr(s->pd, IB_MR_TYPE_MEM_REG, KT_MR_PAGES);
	if (IS_ERR(s->mr)) {
		int ret = PTR_ERR(s->mr);

		s->mr = NULL;
		return kt_why(why, "ib_alloc_mr: %d", ret);
	}

	init.send_cq = s->scq.cq;
	init.recv_cq = s->rcq.cq;
	s->qp = ib_create_qp(s->pd, &init);
	if (IS_ERR(s->qp)) {
		int ret = PTR_ERR(s->qp);

		s->qp = NULL;
		return kt_why(why, "ib_create_qp: %d", ret);
	}
	if (init.cap.max_send_wr < 32 || init.cap.max_recv_wr < 32 ||
	    init.cap.max_send_sge < 1 || init.cap.max_recv_sge < 1)
		return kt_why(why, "ib_create_qp granted %u/%u WRs, %u/%u SGEs",
			      init.cap.max_send_wr, init.cap.max_recv_wr,
			      init.cap.max_send_sge, init.cap.max_recv_sge);
	return 0;
}

static void kt_run_all(void)
{
	char why[KT_WHY_LEN] = "";
	int ret;

	ret = kt_side_init(&kt_a, why);
	if (!ret)
		ret = kt_side_init(&kt_b, why);
	kt_report("setup", ret, why);
	if (ret)
		return;
	pr_info("ktest: QP A %s qpn %u gid %d %pI6, QP B %s qpn %u gid %d %pI6\n",
		dev_name(&kt_a.dev->dev), kt_a.qp->qp_num, kt_a.gid_index,
		kt_a.gid.raw, dev_name(&kt_b.dev->dev), kt_b.qp->qp_num,
		kt_b.gid_index, kt_b.gid.raw);

	ret = kt_connect(why);
	kt_report("connect", ret, why);
	if (ret)
		return;

	ret = kt_check_query_qp(why);
	kt_report("query_qp", ret, why);
	ret = kt_check_bad_transition(why);
	kt_report("modify_qp_invalid_transition", ret, why);
	ret = kt_check_ud(why);
	kt_report("ud_qp_and_ah", ret, why);
	ret = kt_check_uc(why);
	kt_report("uc", ret, why);
	if (kt_a.dev->attrs.max_srq) {
		ret = kt_check_srq(why);
		kt_report("srq", ret, why);
	}

	kt_run("send", kt_test_send);
	kt_run("send_with_imm", kt_test_send_with_imm);
	kt_run("notify_solicited", kt_test_notify_solicited);
	kt_run("notify_missed_events", kt_test_notify_missed);
	kt_run("reg_mr", kt_test_reg_mr);
	kt_run("rdma_write", kt_test_rdma_write);
	kt_run("rdma_write_with_imm", kt_test_rdma_write_with_imm);
	kt_run("rdma_read", kt_test_rdma_read);
	kt_run("atomic_cmp_and_swp", kt_test_cmp_and_swp);
	kt_run("atomic_fetch_and_add", kt_test_fetch_and_add);
	kt_run("reg_mr_new_key", kt_test_reg_mr_rdma);
	kt_run("local_inv", kt_test_local_inv);
	kt_run("local_inv_rem_access_err", kt_test_invalidated_write);
	kt_run("send_with_inv", kt_test_send_with_inv);
	kt_run("send_with_inv_rem_access_err", kt_test_invalidated_write);
	kt_run("resize_cq", kt_test_resize_cq);
	kt_run("bad_lkey_loc_prot_err", kt_test_bad_lkey);
	kt_run("bad_rkey_rem_access_err", kt_test_bad_rkey);
	kt_run("short_recv_loc_len_err", kt_test_short_recv);
	kt_run("rnr_retry_exc_err", kt_test_rnr);
	kt_run("wr_flush_err", kt_test_flush);
	kt_run("send_after_reset", kt_test_send);
}

static struct ib_client kt_client;	/* loop=1, below */

static int __init kt_init(void)
{
	const char *name2 = ibdev2 && ibdev2[0] ? ibdev2 : ibdev;
	char why[KT_WHY_LEN];

	if (loop)
		return ib_register_client(&kt_client);

	/* B takes its own reference even on A's device: one teardown. */
	kt_a.dev = ib_device_get_by_name(ibdev, RDMA_DRIVER_UNKNOWN);
	kt_b.dev = ib_device_get_by_name(name2, RDMA_DRIVER_UNKNOWN);
	if (kt_a.dev && kt_b.dev) {
		kt_run_all();
		kt_side_fini(&kt_b);
		kt_side_fini(&kt_a);
	} else {
		kt_why(why, "no IB device %s", kt_a.dev ? name2 : ibdev);
		kt_report("setup", -1, why);
	}
	if (kt_b.dev)
		ib_device_put(kt_b.dev);
	if (kt_a.dev)
		ib_device_put(kt_a.dev);
	pr_info("ktest: RESULT passed=%d failed=%d\n", kt_passed, kt_failed);
	return 0;
}

/* -------------------------------------------------------------------- */
/* loop=1: an ib_client running rounds until its device goes */

static struct task_struct *kt_loop_task;
static struct ib_device *kt_loop_dev;

static int kt_loop_fn(void *arg)
{
	char why[KT_WHY_LEN] = "";
	int rounds = 0, ret;

	ret = kt_side_init(&kt_a, why);
	if (!ret)
		ret = kt_side_init(&kt_b, why);
	if (!ret)
		ret = kt_connect(why);
	kt_report("loop_setup", ret, why);
	while (!ret && !kthread_should_stop()) {
		kt_run("loop_send", kt_test_send);
		kt_run("loop_rdma_write", kt_test_rdma_write);
		kt_run("loop_rdma_read", kt_test_rdma_read);
		rounds++;
		cond_resched();
	}
	kt_side_fini(&kt_b);
	kt_side_fini(&kt_a);
	pr_info("ktest: LOOP %s rounds=%d passed=%d failed=%d\n",
		dev_name(&kt_loop_dev->dev), rounds, kt_passed, kt_failed);
	/* kthread_stop() reaps the thread: it must not be gone before. */
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		schedule_timeout(HZ / 10);
	}
	return 0;
}

static int kt_loop_add(struct ib_device *dev)
{
	struct task_struct *t;

	if (strcmp(dev_name(&dev->dev), ibdev) || kt_loop_task)
		return -EOPNOTSUPP;
	/* A new life: nothing of the last device's (its MR's keys) is kept. */
	kt_a = (struct kt_side){ .name = "A", .sq_psn = 100, .dev = dev };
	kt_b = (struct kt_side){ .name = "B", .sq_psn = 200, .dev = dev };
	kt_passed = 0;
	kt_failed = 0;
	kt_timeouts = 0;
	kt_dirty = false;
	kt_broken = false;
	kt_rnr_retry = 7;
	kt_loop_dev = dev;
	t = kthread_run(kt_loop_fn, NULL, "pvrdma_ktest");
	if (IS_ERR(t))
		return PTR_ERR(t);
	kt_loop_task = t;
	pr_info("ktest: LOOP %s started\n", dev_name(&dev->dev));
	return 0;
}

static void kt_loop_remove(struct ib_device *dev, void *client_data)
{
	if (dev != kt_loop_dev || !kt_loop_task)
		return;
	pr_info("ktest: LOOP %s removed: stopping\n", dev_name(&dev->dev));
	kthread_stop(kt_loop_task);
	kt_loop_task = NULL;
	kt_loop_dev = NULL;
	kt_a.dev = NULL;
	kt_b.dev = NULL;
}

static struct ib_client kt_client = {
	.name = "pvrdma_ktest",
	.add = kt_loop_add,
	.remove = kt_loop_remove,
};

static void __exit kt_exit(void)
{
	if (loop)
		ib_unregister_client(&kt_client);
}

module_init(kt_init);
module_exit(kt_exit);
