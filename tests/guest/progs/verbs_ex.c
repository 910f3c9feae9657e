/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The extended verbs API and the QP/SRQ control verbs, through plain
 * libibverbs, with every byte and completion field checked:
 *
 *  - ibv_create_cq_ex with the standard fields, polled with
 *    ibv_start_poll / ibv_next_poll / ibv_end_poll and ibv_wc_read_*;
 *  - ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: every RC
 *    opcode built with ibv_wr_* in one batch (SGE, SGE list, inline data
 *    list), a UD batch (ibv_wr_set_ud_addr, inline, the QP's Q_Key), an
 *    aborted batch, batches that fail as a whole (too many SGEs, a full
 *    ring, a UD WR without an address), the classic post_send / poll_cq
 *    on the same objects;
 *  - ibv_query_qp returning what was set; the SRQ limit (modify, query,
 *    the SRQ_LIMIT_REACHED event, disarmed after it);
 *  - QP state transitions: the attribute masks the IBA requires and
 *    allows (refusals included), RTS -> SQD with the SQ_DRAINED event,
 *    SQD -> SQD, SQD -> RTS with data flowing after, ERR -> RESET;
 *  - XRC: a domain shared by two contexts, XRC SRQs, ibv_open_qp,
 *    XRC_SEND to XRC_RECV with every byte and completion field checked;
 *  - what applications set freely: IBV_QP_INIT_ATTR_CREATE_FLAGS with no
 *    flag, QP access bits the device does not implement (flush), window
 *    binds asking for LOCAL_WRITE; ibv_rereg_mr keeping the keys.
 *
 *   verbs_ex -d DEV [-D PEER_DEV] [-g GID_INDEX] [-t TIMEOUT_S]
 *
 * The requester QPs live on DEV, the responders on PEER_DEV (default: a
 * second context on DEV). The same checks pass on Soft-RoCE (rxe), which
 * is how the test itself is checked: what a device may decide for itself
 * (completion timestamps, memory-window opcodes) is checked only where
 * the device is this project's (vendor 0x15ad) and printed otherwise.
 * Prints "PASS name" / "FAIL name: why" per check, then "RESULT passed=N
 * failed=M"; exits non-zero on any failure. Waits give up after
 * TIMEOUT_S (default 10) seconds.
 */
#include <byteswap.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>

#define PORT		1
#define BUF_SIZE	(64 * 1024)
#define DEPTH		16
#define MAX_SGE		4
#define INLINE_WANT	64
#define QKEY		0x11111111u
#define PSN_A		0x2345
#define PSN_B		0x6789
#define GRH_LEN		40
#define QUIET_MS	200
#define VENDOR_PVRDMA	0x15ad

#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define RC_OPS (IBV_QP_EX_WITH_RDMA_WRITE | \
		IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
		IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | \
		IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
		IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
#define WC_FIELDS (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | \
		   IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP)

struct dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	int gid_index;
	union ibv_gid gid;
};

/* One QP with its own extended CQ and registered buffer. */
struct side {
	struct dev *dev;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct ibv_ah *ah;		/* UD: towards the other side */
};

/* A completion as read through the extended CQ API. */
struct cqe {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	unsigned int wc_flags;
	uint32_t byte_len, qp_num, src_qp, imm;
};

static int timeout_s = 10;
static int passed, failed;
static char why[512];

static int bad(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return -1;
}

static void report(const char *name, int rc)
{
	if (rc) {
		failed++;
		printf("FAIL %s: %s\n", name, why);
	} else {
		passed++;
		printf("PASS %s\n", name);
	}
	fflush(stdout);
	why[0] = 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fill(uint8_t *p, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

static bool is_pvrdma(const struct dev *d)
{
	return d->attr.vendor_id == VENDOR_PVRDMA;
}

/* The first RoCE v2 IPv4-mapped GID of the port, else index 0. */
static int pick_gid(struct dev *d)
{
	struct ibv_port_attr pa;
	int i;

	if (ibv_query_port(d->ctx, PORT, &pa))
		return -1;
	if (d->gid_index < 0) {
		d->gid_index = 0;
		for (i = 0; i < pa.gid_tbl_len; i++) {
			struct ibv_gid_entry ge;

			if (ibv_query_gid_ex(d->ctx, PORT, i, &ge, 0))
				continue;
			if (ge.gid_type == IBV_GID_TYPE_ROCE_V2 &&
			    !memcmp(ge.gid.raw,
				    "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
				d->gid_index = i;
				break;
			}
		}
	}
	return ibv_query_gid(d->ctx, PORT, d->gid_index, &d->gid);
}

static int dev_open(struct dev *d, const char *name, int gid_index)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	int i;

	d->name = name;
	d->gid_index = gid_index;
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx) {
		fprintf(stderr, "verbs_ex: cannot open %s\n", name);
		return -1;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd || ibv_query_device(d->ctx, &d->attr) || pick_gid(d)) {
		fprintf(stderr, "verbs_ex: %s: PD, query or GID failed\n",
			name);
		return -1;
	}
	/* Async events are waited for with poll(). */
	fcntl(d->ctx->async_fd, F_SETFL,
	      fcntl(d->ctx->async_fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

/* Asked of the CQs side_create makes besides WC_FIELDS (timestamps). */
static uint64_t extra_wc_flags;

/* For t_parent_domain: sides made in this parent domain (CQ, QP, MR). */
static struct ibv_pd *side_pad;
/* How long cq_ex_create's ibv_create_cq_ex took last (ns). */
static int64_t cq_create_ns;

static int64_t real_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static struct ibv_cq_ex *cq_ex_create(struct dev *d)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 4 * DEPTH,
		.wc_flags = WC_FIELDS | extra_wc_flags,
	};
	struct ibv_cq_ex *cq;
	int64_t t0;

	if (side_pad) {
		ca.comp_mask |= IBV_CQ_INIT_ATTR_MASK_PD;
		ca.parent_domain = side_pad;
	}
	t0 = real_ns();
	cq = ibv_create_cq_ex(d->ctx, &ca);
	cq_create_ns = real_ns() - t0;
	return cq;
}

/*
 * A side: its CQ, QP (extended with @ops when non-zero), buffer and MR.
 * @srq: receive from it.
 */
/*
 * For t_qp_extras: QPs made with IBV_QP_INIT_ATTR_CREATE_FLAGS (no flags),
 * and INIT access bits beyond the four every RC QP here gets.
 */
static bool with_create_flags;
static unsigned int extra_qp_access;

static int side_create(struct side *s, struct dev *d, enum ibv_qp_type type,
		       uint64_t ops, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = type,
		.cap = {
			.max_send_wr = DEPTH, .max_recv_wr = DEPTH,
			.max_send_sge = MAX_SGE, .max_recv_sge = MAX_SGE,
			.max_inline_data = INLINE_WANT,
		},
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = side_pad ? side_pad : d->pd,
		.srq = srq,
	};

	memset(s, 0, sizeof(*s));
	s->dev = d;
	s->cq = cq_ex_create(d);
	if (!s->cq)
		return bad("%s: ibv_create_cq_ex: %s", d->name,
			   strerror(errno));
	qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(s->cq);
	if (ops) {
		qa.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags = ops;
	}
	if (with_create_flags)
		qa.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	s->qp = ibv_create_qp_ex(d->ctx, &qa);
	if (!s->qp)
		return bad("%s: ibv_create_qp_ex: %s", d->name,
			   strerror(errno));
	if (qa.cap.max_inline_data < INLINE_WANT)
		return bad("%s: max_inline_data %u < %u", d->name,
			   qa.cap.max_inline_data, INLINE_WANT);
	s->qpx = ops ? ibv_qp_to_qp_ex(s->qp) : NULL;
	if (ops && !s->qpx)
		return bad("%s: ibv_qp_to_qp_ex gave NULL", d->name);
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->buf)
		return bad("out of memory");
	memset(s->buf, 0, BUF_SIZE);
	s->mr = ibv_reg_mr(qa.pd, s->buf, BUF_SIZE, ALL_ACCESS);
	if (!s->mr)
		return bad("%s: ibv_reg_mr: %s", d->name, strerror(errno));
	return 0;
}

static void side_destroy(struct side *s)
{
	if (s->ah)
		ibv_destroy_ah(s->ah);
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(s->cq));
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

static int to_init(struct side *s)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = PORT,
		.qp_access_flags = ALL_ACCESS | extra_qp_access, .qkey = QKEY,
	};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	mask |= s->qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY :
					       IBV_QP_ACCESS_FLAGS;
	return ibv_modify_qp(s->qp, &a, mask);
}

static void rtr_attr(struct side *s, struct side *peer, uint32_t rq_psn,
		     struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = peer->qp->qp_num;
	a->rq_psn = rq_psn;
	a->max_dest_rd_atomic = 4;
	a->min_rnr_timer = 12;
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = PORT;
	a->ah_attr.grh.dgid = peer->dev->gid;
	a->ah_attr.grh.sgid_index = s->dev->gid_index;
	a->ah_attr.grh.hop_limit = 64;
}

#define RTR_MASK (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | \
		  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | \
		  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RTS_MASK (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | \
		  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)

static void rts_attr(uint32_t sq_psn, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->timeout = 14;
	a->retry_cnt = 7;
	a->rnr_retry = 7;
	a->sq_psn = sq_psn;
	a->max_rd_atomic = 4;
}

static int rc_connect_one(struct side *s, struct side *peer, uint32_t rq_psn,
			  uint32_t sq_psn)
{
	struct ibv_qp_attr a;

	if (to_init(s))
		return bad("INIT: %s", strerror(errno));
	rtr_attr(s, peer, rq_psn, &a);
	if (ibv_modify_qp(s->qp, &a, RTR_MASK))
		return bad("RTR: %s", strerror(errno));
	rts_attr(sq_psn, &a);
	if (ibv_modify_qp(s->qp, &a, RTS_MASK))
		return bad("RTS: %s", strerror(errno));
	return 0;
}

static int rc_connect(struct side *a, struct side *b)
{
	if (rc_connect_one(a, b, PSN_B, PSN_A) ||
	    rc_connect_one(b, a, PSN_A, PSN_B))
		return -1;
	return 0;
}

static int ud_ready(struct side *s, struct side *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	struct ibv_ah_attr ah = {
		.is_global = 1, .port_num = PORT,
		.grh = { .dgid = peer->dev->gid,
			 .sgid_index = s->dev->gid_index, .hop_limit = 64 },
	};

	if (to_init(s) || ibv_modify_qp(s->qp, &a, IBV_QP_STATE))
		return bad("UD INIT/RTR: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = PSN_A;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return bad("UD RTS: %s", strerror(errno));
	s->ah = ibv_create_ah(s->dev->pd, &ah);
	if (!s->ah)
		return bad("ibv_create_ah: %s", strerror(errno));
	return 0;
}

static int post_recv(struct side *s, uint64_t wr_id, uint32_t off,
		     uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->buf + off, .length = len,
		.lkey = s->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				  .num_sge = 1 }, *bad_wr;

	return ibv_post_recv(s->qp, &wr, &bad_wr);
}

static void read_cqe(struct ibv_cq_ex *cq, struct cqe *e)
{
	e->wr_id = cq->wr_id;
	e->status = cq->status;
	e->opcode = ibv_wc_read_opcode(cq);
	e->wc_flags = ibv_wc_read_wc_flags(cq);
	e->byte_len = ibv_wc_read_byte_len(cq);
	e->qp_num = ibv_wc_read_qp_num(cq);
	e->src_qp = ibv_wc_read_src_qp(cq);
	e->imm = e->wc_flags & IBV_WC_WITH_INV ?
			 ibv_wc_read_invalidated_rkey(cq) :
			 be32toh(ibv_wc_read_imm_data(cq));
}

/*
 * Take @n completions with the extended poll API (several per
 * start/next/end round where they are there), within the timeout.
 */
static int poll_n(struct side *s, struct cqe *out, int n)
{
	struct ibv_poll_cq_attr attr = {};
	uint64_t end = now_ms() + timeout_s * 1000;
	int got = 0, ret;

	while (got < n) {
		ret = ibv_start_poll(s->cq, &attr);
		if (ret == ENOENT) {
			if (now_ms() > end)
				return bad("%s: %d of %d completions came",
					   s->dev->name, got, n);
			continue;
		}
		if (ret)
			return bad("ibv_start_poll: %d", ret);
		do {
			read_cqe(s->cq, &out[got++]);
			if (got == n)
				break;
			ret = ibv_next_poll(s->cq);
		} while (!ret);
		ibv_end_poll(s->cq);
		if (ret && ret != ENOENT)
			return bad("ibv_next_poll: %d", ret);
	}
	return 0;
}

/* Nothing completes on @s for QUIET_MS. */
static int quiet(struct side *s)
{
	struct ibv_poll_cq_attr attr = {};
	uint64_t end = now_ms() + QUIET_MS;

	while (now_ms() < end) {
		if (!ibv_start_poll(s->cq, &attr)) {
			uint64_t id = s->cq->wr_id;

			ibv_end_poll(s->cq);
			return bad("%s: unexpected completion wr_id %" PRIu64,
				   s->dev->name, id);
		}
	}
	return 0;
}

static int check_cqe(const struct cqe *e, uint64_t wr_id,
		     enum ibv_wc_opcode opcode, uint32_t qp_num)
{
	if (e->wr_id != wr_id || e->status != IBV_WC_SUCCESS ||
	    e->opcode != opcode || e->qp_num != qp_num)
		return bad("CQE wr_id %" PRIu64 " status %s opcode %d qp %#x, "
			   "expected wr_id %" PRIu64 " success opcode %d "
			   "qp %#x", e->wr_id, ibv_wc_status_str(e->status),
			   e->opcode, e->qp_num, wr_id, opcode, qp_num);
	return 0;
}

static int check_recv(const struct cqe *e, uint64_t wr_id,
		      enum ibv_wc_opcode opcode, uint32_t qp_num,
		      uint32_t len, bool imm, uint32_t imm_val)
{
	if (check_cqe(e, wr_id, opcode, qp_num))
		return -1;
	if (e->byte_len != len)
		return bad("wr_id %" PRIu64 ": byte_len %u, expected %u",
			   wr_id, e->byte_len, len);
	if (!!(e->wc_flags & IBV_WC_WITH_IMM) != imm ||
	    (imm && e->imm != imm_val))
		return bad("wr_id %" PRIu64 ": wc_flags %#x imm %#x, expected "
			   "%s %#x", wr_id, e->wc_flags, e->imm,
			   imm ? "WITH_IMM" : "no imm", imm_val);
	return 0;
}

static int check_bytes(const uint8_t *got, const uint8_t *want, size_t len,
		       const char *what)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (got[i] != want[i])
			return bad("%s: byte %zu is %#x, expected %#x", what, i,
				   got[i], want[i]);
	return 0;
}

/* Buffer map of the RC tests (offsets into each side's buffer). */
#define SRC		0	/* A: data sent and written, 16 KiB */
#define RECV0		16384	/* B: receives, 1 KiB apart */
#define WRITE_AT	24576	/* B: RDMA WRITE target */
#define WRITE_IMM_AT	28672	/* B: RDMA WRITE with immediate target */
#define READ_FROM	32768	/* B: RDMA READ source */
#define READ_TO		36864	/* A: RDMA READ destination */
#define ATOMIC_AT	40960	/* B: the atomic word */
#define ATOMIC_RES	40960	/* A: original values, 8 bytes each */

static void sge_at(struct side *s, struct ibv_sge *sge, uint32_t off,
		   uint32_t len)
{
	sge->addr = (uintptr_t)s->buf + off;
	sge->length = len;
	sge->lkey = s->mr->lkey;
}

/* Every RC opcode in one ibv_wr_* batch, each byte checked. */
static int t_rc_batch(struct side *a, struct side *b)
{
	const uint64_t atom0 = 0x0102030405060708ull, swap = 0xa1a2a3a4a5a6a7a8ull;
	const uint64_t add = 0x1000000010ull;
	struct ibv_qp_ex *x = a->qpx;
	struct ibv_sge sgl[3];
	struct ibv_data_buf inl[2];
	struct cqe ca[8], cb[4];
	uint64_t v;
	int i;

	fill(a->buf + SRC, 16384, 0x31);
	fill(b->buf + READ_FROM, 4096, 0x77);
	memset(b->buf + RECV0, 0, 4096);
	memset(b->buf + WRITE_AT, 0, 8192);
	memcpy(b->buf + ATOMIC_AT, &atom0, 8);
	for (i = 0; i < 4; i++)
		if (post_recv(b, 100 + i, RECV0 + i * 1024, 1024))
			return bad("post_recv: %s", strerror(errno));

	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, a->mr->lkey, (uintptr_t)a->buf + SRC, 100);

	x->wr_id = 2;
	ibv_wr_send_imm(x, htobe32(0x11223344));
	sge_at(a, &sgl[0], SRC + 1000, 10);
	sge_at(a, &sgl[1], SRC + 3000, 300);
	ibv_wr_set_sge_list(x, 2, sgl);

	x->wr_id = 3;
	ibv_wr_rdma_write(x, b->mr->rkey, (uintptr_t)b->buf + WRITE_AT + 5);
	sge_at(a, &sgl[0], SRC + 4096, 1000);
	sge_at(a, &sgl[1], SRC + 7, 1);
	sge_at(a, &sgl[2], SRC + 8192, 2047);
	ibv_wr_set_sge_list(x, 3, sgl);

	x->wr_id = 4;
	ibv_wr_rdma_write_imm(x, b->mr->rkey,
			      (uintptr_t)b->buf + WRITE_IMM_AT, htobe32(0xabcdef01));
	ibv_wr_set_sge(x, a->mr->lkey, (uintptr_t)a->buf + SRC + 12000, 333);

	x->wr_id = 5;
	ibv_wr_rdma_read(x, b->mr->rkey, (uintptr_t)b->buf + READ_FROM + 3);
	ibv_wr_set_sge(x, a->mr->lkey, (uintptr_t)a->buf + READ_TO, 3000);

	x->wr_id = 6;
	ibv_wr_atomic_cmp_swp(x, b->mr->rkey, (uintptr_t)b->buf + ATOMIC_AT,
			      atom0, swap);
	ibv_wr_set_sge(x, a->mr->lkey, (uintptr_t)a->buf + ATOMIC_RES, 8);

	x->wr_id = 7;
	ibv_wr_atomic_fetch_add(x, b->mr->rkey, (uintptr_t)b->buf + ATOMIC_AT,
				add);
	ibv_wr_set_sge(x, a->mr->lkey, (uintptr_t)a->buf + ATOMIC_RES + 8, 8);

	x->wr_id = 8;
	ibv_wr_send(x);
	inl[0].addr = a->buf + SRC + 500;
	inl[0].length = 20;
	inl[1].addr = a->buf + SRC + 600;
	inl[1].length = INLINE_WANT - 20;
	ibv_wr_set_inline_data_list(x, 2, inl);
	/* The inline bytes were taken at the call: changing them is fine. */
	memset(a->buf + SRC + 500, 0xee, 200);

	if (ibv_wr_complete(x))
		return bad("ibv_wr_complete: %s", strerror(errno));

	if (poll_n(a, ca, 8))
		return -1;
	{
		static const enum ibv_wc_opcode op[8] = {
			IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE,
			IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_COMP_SWAP,
			IBV_WC_FETCH_ADD, IBV_WC_SEND,
		};

		for (i = 0; i < 8; i++)
			if (check_cqe(&ca[i], i + 1, op[i], a->qp->qp_num))
				return -1;
	}
	if (poll_n(b, cb, 4))
		return -1;
	/* A WRITE with immediate consumes a receive too (the third). */
	if (check_recv(&cb[0], 100, IBV_WC_RECV, b->qp->qp_num, 100, false, 0) ||
	    check_recv(&cb[1], 101, IBV_WC_RECV, b->qp->qp_num, 310, true,
		       0x11223344) ||
	    check_recv(&cb[2], 102, IBV_WC_RECV_RDMA_WITH_IMM, b->qp->qp_num,
		       333, true, 0xabcdef01) ||
	    check_recv(&cb[3], 103, IBV_WC_RECV, b->qp->qp_num, INLINE_WANT,
		       false, 0))
		return -1;

	/* The data, byte by byte, and nothing around it. */
	if (check_bytes(b->buf + RECV0, a->buf + SRC, 100, "SEND") ||
	    check_bytes(b->buf + RECV0 + 1024, a->buf + SRC + 1000, 10,
			"SEND_IMM sge 0") ||
	    check_bytes(b->buf + RECV0 + 1034, a->buf + SRC + 3000, 300,
			"SEND_IMM sge 1") ||
	    check_bytes(b->buf + WRITE_AT + 5, a->buf + SRC + 4096, 1000,
			"WRITE sge 0") ||
	    check_bytes(b->buf + WRITE_AT + 1005, a->buf + SRC + 7, 1,
			"WRITE sge 1") ||
	    check_bytes(b->buf + WRITE_AT + 1006, a->buf + SRC + 8192, 2047,
			"WRITE sge 2") ||
	    check_bytes(b->buf + WRITE_IMM_AT, a->buf + SRC + 12000, 333,
			"WRITE_IMM") ||
	    check_bytes(a->buf + READ_TO, b->buf + READ_FROM + 3, 3000, "READ"))
		return -1;
	if (b->buf[WRITE_AT + 4] || b->buf[WRITE_AT + 3053] ||
	    b->buf[RECV0 + 100] || b->buf[RECV0 + 1334])
		return bad("bytes next to a WRITE or receive were changed");
	/* Inline: what the buffers held at the call (the pattern). */
	{
		uint8_t src[16384];

		fill(src, sizeof(src), 0x31);
		if (check_bytes(b->buf + RECV0 + 3072, src + 500, 20,
				"inline buf 0") ||
		    check_bytes(b->buf + RECV0 + 3092, src + 600,
				INLINE_WANT - 20, "inline buf 1"))
			return -1;
	}
	memcpy(&v, a->buf + ATOMIC_RES, 8);
	if (v != atom0)
		return bad("CMP_SWP returned %#" PRIx64 ", expected %#" PRIx64,
			   v, atom0);
	memcpy(&v, a->buf + ATOMIC_RES + 8, 8);
	if (v != swap)
		return bad("FETCH_ADD returned %#" PRIx64 ", expected %#" PRIx64,
			   v, swap);
	memcpy(&v, b->buf + ATOMIC_AT, 8);
	if (v != swap + add)
		return bad("atomic word %#" PRIx64 ", expected %#" PRIx64, v,
			   swap + add);
	return 0;
}

/* Post one signaled SEND of @len bytes at SRC + @off through ibv_wr_*. */
static int wr_send_one(struct side *a, uint64_t wr_id, uint32_t off,
		       uint32_t len)
{
	ibv_wr_start(a->qpx);
	a->qpx->wr_id = wr_id;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(a->qpx);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + SRC + off,
		       len);
	return ibv_wr_complete(a->qpx);
}

/* A SEND of SRC + @off arrives in @b's receive 0, nothing else on either. */
static int expect_only_send(struct side *a, struct side *b, uint64_t wr_id,
			    uint32_t off, uint32_t len)
{
	struct cqe e;

	if (poll_n(a, &e, 1) ||
	    check_cqe(&e, wr_id, IBV_WC_SEND, a->qp->qp_num) ||
	    poll_n(b, &e, 1) ||
	    check_recv(&e, 500, IBV_WC_RECV, b->qp->qp_num, len, false, 0) ||
	    check_bytes(b->buf + RECV0, a->buf + SRC + off, len, "SEND") ||
	    quiet(a) || quiet(b))
		return -1;
	return 0;
}

/* ibv_wr_abort: the WRs of the batch never reach the device. */
static int t_abort(struct side *a, struct side *b)
{
	fill(a->buf + SRC, 4096, 0x52);
	if (post_recv(b, 500, RECV0, 1024))
		return bad("post_recv: %s", strerror(errno));
	ibv_wr_start(a->qpx);
	a->qpx->wr_id = 400;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(a->qpx);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + SRC, 10);
	ibv_wr_rdma_write(a->qpx, b->mr->rkey, (uintptr_t)b->buf + WRITE_AT);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + SRC, 10);
	ibv_wr_abort(a->qpx);
	if (quiet(a) || quiet(b))
		return -1;
	if (wr_send_one(a, 401, 2000, 77))
		return bad("ibv_wr_complete: %s", strerror(errno));
	return expect_only_send(a, b, 401, 2000, 77);
}

/*
 * A batch with one bad WR is refused whole (ibv_wr_complete returns the
 * error, no WR of it runs): too many SGEs after a good SEND; more WRs
 * than the send queue holds.
 */
static int t_bad_batch(struct side *a, struct side *b)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	struct ibv_sge sgl[MAX_SGE + 1];
	uint32_t i, depth;
	int err;

	if (ibv_query_qp(a->qp, &qa, IBV_QP_CAP, &ia))
		return bad("ibv_query_qp: %s", strerror(errno));
	fill(a->buf + SRC, 4096, 0x63);
	if (post_recv(b, 500, RECV0, 1024))
		return bad("post_recv: %s", strerror(errno));

	for (i = 0; i <= MAX_SGE; i++)
		sge_at(a, &sgl[i], SRC + i * 8, 8);
	ibv_wr_start(a->qpx);
	a->qpx->wr_id = 600;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(a->qpx);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + SRC, 16);
	ibv_wr_send(a->qpx);
	ibv_wr_set_sge_list(a->qpx, qa.cap.max_send_sge + 1, sgl);
	err = ibv_wr_complete(a->qpx);
	if (!err)
		return bad("a WR with %u SGEs (max %u) was taken",
			   qa.cap.max_send_sge + 1, qa.cap.max_send_sge);
	if (quiet(a) || quiet(b))
		return -1;

	depth = qa.cap.max_send_wr;
	ibv_wr_start(a->qpx);
	for (i = 0; i <= depth; i++) {
		a->qpx->wr_id = 700 + i;
		a->qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(a->qpx, b->mr->rkey,
				  (uintptr_t)b->buf + WRITE_AT);
		ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + SRC,
			       8);
	}
	err = ibv_wr_complete(a->qpx);
	if (!err)
		return bad("a batch of %u WRs fit a send queue of %u",
			   depth + 1, depth);
	if (quiet(a) || quiet(b))
		return -1;

	/* The QP goes on as if nothing had been tried. */
	if (wr_send_one(a, 601, 100, 50))
		return bad("ibv_wr_complete: %s", strerror(errno));
	return expect_only_send(a, b, 601, 100, 50);
}

/* The classic calls work on extended objects, in the same order. */
static int t_classic_on_ex(struct side *a, struct side *b)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad_wr;
	struct ibv_wc wc[2];
	uint64_t end = now_ms() + timeout_s * 1000;
	int n = 0;

	fill(a->buf + SRC, 4096, 0x74);
	if (post_recv(b, 500, RECV0, 1024) || post_recv(b, 501, RECV0 + 1024,
							 1024))
		return bad("post_recv: %s", strerror(errno));
	sge_at(a, &sge, SRC, 33);
	wr.wr_id = 800;
	if (ibv_post_send(a->qp, &wr, &bad_wr))
		return bad("ibv_post_send: %s", strerror(errno));
	if (wr_send_one(a, 801, 1000, 44))
		return bad("ibv_wr_complete: %s", strerror(errno));
	while (n < 2 && now_ms() < end) {
		int r = ibv_poll_cq(ibv_cq_ex_to_cq(a->cq), 2 - n, wc + n);

		if (r < 0)
			return bad("ibv_poll_cq: %d", r);
		n += r;
	}
	if (n < 2)
		return bad("%d of 2 send completions", n);
	if (wc[0].wr_id != 800 || wc[1].wr_id != 801 ||
	    wc[0].status || wc[1].status || wc[0].opcode != IBV_WC_SEND)
		return bad("send completions %" PRIu64 "/%d %" PRIu64 "/%d",
			   wc[0].wr_id, wc[0].status, wc[1].wr_id,
			   wc[1].status);
	n = 0;
	while (n < 2 && now_ms() < end) {
		int r = ibv_poll_cq(ibv_cq_ex_to_cq(b->cq), 2 - n, wc + n);

		if (r < 0)
			return bad("ibv_poll_cq: %d", r);
		n += r;
	}
	if (n < 2 || wc[0].wr_id != 500 || wc[0].byte_len != 33 ||
	    wc[1].wr_id != 501 || wc[1].byte_len != 44)
		return bad("receive completions wrong (%d came)", n);
	return check_bytes(b->buf + RECV0, a->buf + SRC, 33, "SEND 1") ||
	       check_bytes(b->buf + RECV0 + 1024, a->buf + SRC + 1000, 44,
			   "SEND 2");
}

/* An RDMA WRITE of SRC + @off to (@rkey, @raddr), completed successfully. */
static int write_one(struct side *a, uint32_t rkey, uint64_t raddr,
		     uint32_t off, uint32_t len, uint64_t wr_id)
{
	struct cqe e;

	ibv_wr_start(a->qpx);
	a->qpx->wr_id = wr_id;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(a->qpx, rkey, raddr);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + SRC + off, len);
	if (ibv_wr_complete(a->qpx))
		return bad("ibv_wr_complete: %s", strerror(errno));
	if (poll_n(a, &e, 1) ||
	    check_cqe(&e, wr_id, IBV_WC_RDMA_WRITE, a->qp->qp_num))
		return -1;
	return 0;
}

/* FETCH_AND_ADD of @add at @raddr, which held @was: both checked. */
static int fetch_add_one(struct side *a, uint32_t rkey, uint64_t raddr,
			 uint64_t add, uint64_t wr_id, uint64_t was)
{
	uint64_t got, now;
	struct cqe e;

	ibv_wr_start(a->qpx);
	a->qpx->wr_id = wr_id;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(a->qpx, rkey, raddr, add);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + READ_TO, 8);
	if (ibv_wr_complete(a->qpx))
		return bad("ibv_wr_complete: %s", strerror(errno));
	if (poll_n(a, &e, 1) ||
	    check_cqe(&e, wr_id, IBV_WC_FETCH_ADD, a->qp->qp_num))
		return -1;
	memcpy(&got, a->buf + READ_TO, 8);
	memcpy(&now, (void *)(uintptr_t)raddr, 8);
	if (got != was || now != was + add)
		return bad("FETCH_AND_ADD: got %" PRIu64 " (want %" PRIu64
			   "), memory %" PRIu64 " (want %" PRIu64 ")", got,
			   was, now, was + add);
	return 0;
}

/*
 * ibv_rereg_mr: a local-only MR gets remote write access, keeping its keys
 * (a peer's rkey keeps working, also after local-only and back: an atomic),
 * and (on this device; Soft-RoCE cannot change a translation) moves to
 * other pages; WRITEs through the keys it has then land where it now is,
 * and only there; a change of PD, keeping the keys.
 */
static int t_rereg(struct side *a, struct side *b)
{
	uint8_t *x = b->buf + WRITE_AT, *y = b->buf + READ_FROM;
	struct ibv_pd *pd2;
	struct ibv_mr *mr, k0;
	int err, rc = -1;

	fill(a->buf + SRC, 8192, 0xc9);
	memset(x, 0, 4096);
	memset(y, 0, 4096);
	mr = ibv_reg_mr(b->dev->pd, x, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return bad("ibv_reg_mr: %s", strerror(errno));
	k0 = *mr;
	err = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   ALL_ACCESS);
	if (err && errno == EOPNOTSUPP && !is_pvrdma(b->dev)) {
		/* A device may not offer it (Soft-RoCE's provider does not). */
		printf("# %s: ibv_rereg_mr not offered\n", b->dev->name);
		rc = 0;
		goto out;
	}
	if (err) {
		bad("access change: %d (%s)", err, strerror(errno));
		goto out;
	}
	if (write_one(a, mr->rkey, (uintptr_t)x + 100, 0, 1000, 1300) ||
	    check_bytes(x + 100, a->buf + SRC, 1000, "WRITE after the access change"))
		goto out;
	/*
	 * A peer may still hold the first keys: on this device an access or
	 * PD change keeps them (the pages stay), as Soft-RoCE does. Local
	 * only, then remote access again: an atomic with the first rkey.
	 */
	if (is_pvrdma(b->dev) && (mr->lkey != k0.lkey || mr->rkey != k0.rkey)) {
		bad("access change moved the keys %#x/%#x to %#x/%#x",
		    k0.lkey, k0.rkey, mr->lkey, mr->rkey);
		goto out;
	}
	if (ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			 IBV_ACCESS_LOCAL_WRITE) ||
	    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			 ALL_ACCESS)) {
		bad("access changes back and forth: %s", strerror(errno));
		goto out;
	}
	if (is_pvrdma(b->dev) && mr->rkey != k0.rkey) {
		bad("access back to remote: rkey %#x, was %#x", mr->rkey,
		    k0.rkey);
		goto out;
	}
	memcpy(x + 2048, &(uint64_t){ 1000 }, 8);
	if (fetch_add_one(a, mr->rkey, (uintptr_t)x + 2048, 7, 1302, 1000))
		goto out;

	err = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, y, 4096,
			   0);
	if (!is_pvrdma(b->dev)) {
		printf("# %s: translation change %s\n", b->dev->name,
		       err ? "refused" : "done");
	} else if (err) {
		bad("translation change: %d (%s)", err, strerror(errno));
		goto out;
	} else {
		memset(x, 0, 4096);
		if (mr->addr != y || mr->length != 4096 ||
		    write_one(a, mr->rkey, (uintptr_t)y + 7, 2000, 3000, 1301) ||
		    check_bytes(y + 7, a->buf + SRC + 2000, 3000,
				"WRITE after the translation change"))
			goto out;
		if (x[7] || x[100] || x[3006]) {
			bad("the old pages were written");
			goto out;
		}
	}

	pd2 = ibv_alloc_pd(b->dev->ctx);
	if (!pd2) {
		bad("ibv_alloc_pd: %s", strerror(errno));
		goto out;
	}
	k0 = *mr;
	err = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0);
	if (err || mr->pd != pd2) {
		bad("PD change: %d (%s)", err, strerror(errno));
		ibv_dealloc_pd(pd2);
		goto out;
	}
	if (is_pvrdma(b->dev) && (mr->lkey != k0.lkey || mr->rkey != k0.rkey)) {
		bad("PD change moved the keys %#x/%#x to %#x/%#x", k0.lkey,
		    k0.rkey, mr->lkey, mr->rkey);
		ibv_dereg_mr(mr);
		ibv_dealloc_pd(pd2);
		return -1;
	}
	if (ibv_dereg_mr(mr) || ibv_dealloc_pd(pd2))
		return bad("dereg / dealloc after the PD change: %s",
			   strerror(errno));
	return 0;
out:
	ibv_dereg_mr(mr);
	return rc;
}

/* @n SENDs of 40 bytes each from SRC + 100 * i to @b's receives 0.. */
static int sends_pending(struct side *a, struct side *b, int n,
			 uint64_t first_id)
{
	struct cqe e[DEPTH];
	int i;

	for (i = 0; i < n; i++)
		if (post_recv(b, 2000 + i, RECV0 + i * 64, 64))
			return bad("post_recv: %s", strerror(errno));
	ibv_wr_start(a->qpx);
	for (i = 0; i < n; i++) {
		a->qpx->wr_id = first_id + i;
		a->qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(a->qpx);
		ibv_wr_set_sge(a->qpx, a->mr->lkey,
			       (uintptr_t)a->buf + SRC + 100 * i, 40);
	}
	if (ibv_wr_complete(a->qpx))
		return bad("ibv_wr_complete: %s", strerror(errno));
	return poll_n(a, e, n);
}

/* @n receive completions on @b, in order, their data checked. */
static int recvs_arrived(struct side *a, struct side *b, int n)
{
	struct cqe e[DEPTH];
	int i;

	if (poll_n(b, e, n))
		return -1;
	for (i = 0; i < n; i++)
		if (check_recv(&e[i], 2000 + i, IBV_WC_RECV, b->qp->qp_num, 40,
			       false, 0) ||
		    check_bytes(b->buf + RECV0 + i * 64,
				a->buf + SRC + 100 * i, 40, "SEND"))
			return -1;
	return 0;
}

/*
 * ibv_resize_cq: completions not yet polled survive a resize, in order;
 * a size below what is pending is refused and the CQ goes on; an empty
 * CQ shrinks and still takes completions.
 */
static int t_resize_cq(struct side *a, struct side *b)
{
	struct ibv_cq *cq = ibv_cq_ex_to_cq(b->cq);
	int err;

	fill(a->buf + SRC, 4096, 0xd3);
	if (sends_pending(a, b, 3, 1400))
		return -1;
	err = ibv_resize_cq(cq, 3 * DEPTH);
	if (err)
		return bad("grow to %d: %s", 3 * DEPTH, strerror(err));
	if (cq->cqe < 3 * DEPTH)
		return bad("cqe %d after growing to %d", cq->cqe, 3 * DEPTH);
	if (recvs_arrived(a, b, 3) || quiet(b))
		return -1;

	if (sends_pending(a, b, 3, 1410))
		return -1;
	/*
	 * The SENDs completed, so they were acknowledged, which a responder
	 * does after it completed the receive: all three CQEs are there.
	 */
	if (!ibv_resize_cq(cq, 1))
		return bad("a CQ holding 3 completions shrank to 1 entry");
	if (recvs_arrived(a, b, 3))
		return -1;

	err = ibv_resize_cq(cq, 2);
	if (err)
		return bad("shrink to 2: %s", strerror(err));
	if (sends_pending(a, b, 1, 1420) || recvs_arrived(a, b, 1))
		return -1;
	err = ibv_resize_cq(cq, 4 * DEPTH);
	if (err)
		return bad("grow again: %s", strerror(err));
	return 0;
}

/* ibv_query_qp gives back what the RC QP was set to. */
static int t_query_rc(struct side *a, struct side *b)
{
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr ia;
	int mask = IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		   IBV_QP_RQ_PSN | IBV_QP_SQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		   IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER |
		   IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		   IBV_QP_ACCESS_FLAGS | IBV_QP_PORT | IBV_QP_AV | IBV_QP_CAP;

	memset(&q, 0, sizeof(q));
	if (ibv_query_qp(a->qp, &q, mask, &ia))
		return bad("ibv_query_qp: %s", strerror(errno));
	if (q.qp_state != IBV_QPS_RTS || q.path_mtu != IBV_MTU_1024 ||
	    q.dest_qp_num != b->qp->qp_num || q.min_rnr_timer != 12 ||
	    q.timeout != 14 || q.retry_cnt != 7 || q.rnr_retry != 7 ||
	    q.max_rd_atomic < 1 || q.max_dest_rd_atomic < 1 ||
	    q.qp_access_flags != ALL_ACCESS || q.port_num != PORT)
		return bad("state %d mtu %d dqpn %#x rnr %u timeout %u retry "
			   "%u/%u rd_atomic %u/%u access %#x port %u",
			   q.qp_state, q.path_mtu, q.dest_qp_num,
			   q.min_rnr_timer, q.timeout, q.retry_cnt,
			   q.rnr_retry, q.max_rd_atomic, q.max_dest_rd_atomic,
			   q.qp_access_flags, q.port_num);
	if (!q.ah_attr.is_global ||
	    memcmp(q.ah_attr.grh.dgid.raw, b->dev->gid.raw, 16) ||
	    q.ah_attr.grh.sgid_index != a->dev->gid_index)
		return bad("the address vector is not what was set");
	if (q.cap.max_send_wr < DEPTH || q.cap.max_send_sge < MAX_SGE ||
	    q.cap.max_recv_wr < DEPTH || q.cap.max_recv_sge < MAX_SGE ||
	    q.cap.max_inline_data < INLINE_WANT ||
	    ia.cap.max_send_wr != q.cap.max_send_wr ||
	    ia.qp_type != IBV_QPT_RC)
		return bad("caps %u/%u/%u/%u/%u below what was asked",
			   q.cap.max_send_wr, q.cap.max_send_sge,
			   q.cap.max_recv_wr, q.cap.max_recv_sge,
			   q.cap.max_inline_data);
	return 0;
}

/*
 * UD through ibv_wr_*: SEND with immediate and inline data, SEND from an
 * SGE with the QP's Q_Key (high bit), both checked behind the GRH; a WR
 * without an address fails its batch.
 */
static int t_ud(struct side *a, struct side *b)
{
	struct cqe e[2];
	uint8_t src[INLINE_WANT];
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	int err;

	fill(src, sizeof(src), 0x85);
	fill(a->buf + SRC, 4096, 0x96);
	memset(b->buf + RECV0, 0, 4096);
	if (post_recv(b, 900, RECV0, 1024) ||
	    post_recv(b, 901, RECV0 + 1024, 1024))
		return bad("post_recv: %s", strerror(errno));

	ibv_wr_start(a->qpx);
	a->qpx->wr_id = 910;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(a->qpx, htobe32(0x5a5a0001));
	ibv_wr_set_ud_addr(a->qpx, a->ah, b->qp->qp_num, QKEY);
	ibv_wr_set_inline_data(a->qpx, src, sizeof(src));
	a->qpx->wr_id = 911;
	ibv_wr_send(a->qpx);
	ibv_wr_set_ud_addr(a->qpx, a->ah, b->qp->qp_num, 0x80000000u);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + SRC + 9, 900);
	if (ibv_wr_complete(a->qpx))
		return bad("ibv_wr_complete: %s", strerror(errno));

	if (poll_n(a, e, 2) ||
	    check_cqe(&e[0], 910, IBV_WC_SEND, a->qp->qp_num) ||
	    check_cqe(&e[1], 911, IBV_WC_SEND, a->qp->qp_num))
		return -1;
	if (poll_n(b, e, 2) ||
	    check_recv(&e[0], 900, IBV_WC_RECV, b->qp->qp_num,
		       GRH_LEN + INLINE_WANT, true, 0x5a5a0001) ||
	    check_recv(&e[1], 901, IBV_WC_RECV, b->qp->qp_num, GRH_LEN + 900,
		       false, 0))
		return -1;
	if (e[0].src_qp != a->qp->qp_num || e[1].src_qp != a->qp->qp_num ||
	    !(e[0].wc_flags & IBV_WC_GRH) || !(e[1].wc_flags & IBV_WC_GRH))
		return bad("src_qp %#x/%#x (want %#x) or no GRH flag",
			   e[0].src_qp, e[1].src_qp, a->qp->qp_num);
	if (check_bytes(b->buf + RECV0 + GRH_LEN, src, sizeof(src),
			"UD inline") ||
	    check_bytes(b->buf + RECV0 + 1024 + GRH_LEN, a->buf + SRC + 9, 900,
			"UD SEND"))
		return -1;

	/* No address: the batch fails, nothing is sent. */
	if (post_recv(b, 902, RECV0, 1024))
		return bad("post_recv: %s", strerror(errno));
	ibv_wr_start(a->qpx);
	a->qpx->wr_id = 912;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(a->qpx);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + SRC, 10);
	err = ibv_wr_complete(a->qpx);
	if (!err)
		return bad("a UD WR without an address was taken");
	if (quiet(a) || quiet(b))
		return -1;

	/* ibv_query_qp: the Q_Key set at INIT. */
	if (ibv_query_qp(b->qp, &qa, IBV_QP_QKEY | IBV_QP_STATE, &ia))
		return bad("ibv_query_qp: %s", strerror(errno));
	if (qa.qkey != QKEY || qa.qp_state != IBV_QPS_RTS)
		return bad("UD query: qkey %#x state %d", qa.qkey,
			   qa.qp_state);
	return 0;
}

/* UC: RTR without RNR or READ attributes, RTS with the SQ PSN only. */
static int uc_connect(struct side *s, struct side *peer, uint32_t rq_psn)
{
	struct ibv_qp_attr a;

	if (to_init(s))
		return bad("UC INIT: %s", strerror(errno));
	rtr_attr(s, peer, rq_psn, &a);
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV |
				     IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN))
		return bad("UC RTR: %s", strerror(errno));
	rts_attr(rq_psn ^ 0x111, &a);
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return bad("UC RTS: %s", strerror(errno));
	return 0;
}

#define UC_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
		IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)

/*
 * UC: SEND, WRITE and WRITE with immediate arrive, checked; a SEND with
 * no receive WQE and a WRITE with a bad rkey are lost without a word to
 * the requester (success) and the responder goes on.
 */
static int t_uc(struct dev *da, struct dev *db)
{
	struct side a, b;
	struct cqe e[4];
	int rc = -1;

	if (side_create(&a, da, IBV_QPT_UC, UC_OPS, NULL) ||
	    side_create(&b, db, IBV_QPT_UC, 0, NULL) ||
	    uc_connect(&a, &b, PSN_B) || uc_connect(&b, &a, PSN_A ^ 0x111))
		goto out;
	fill(a.buf + SRC, 8192, 0xe4);
	if (post_recv(&b, 3000, RECV0, 1024) ||
	    post_recv(&b, 3001, RECV0 + 1024, 1024)) {
		bad("post_recv: %s", strerror(errno));
		goto out;
	}
	ibv_wr_start(a.qpx);
	a.qpx->wr_id = 3100;
	a.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)a.buf + SRC + 3, 500);
	a.qpx->wr_id = 3101;
	ibv_wr_rdma_write(a.qpx, b.mr->rkey, (uintptr_t)b.buf + WRITE_AT);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)a.buf + SRC + 600, 2000);
	a.qpx->wr_id = 3102;
	ibv_wr_rdma_write_imm(a.qpx, b.mr->rkey, (uintptr_t)b.buf + WRITE_IMM_AT,
			      htobe32(0x0c0c0c0c));
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)a.buf + SRC + 3000, 100);
	if (ibv_wr_complete(a.qpx)) {
		bad("ibv_wr_complete: %s", strerror(errno));
		goto out;
	}
	if (poll_n(&a, e, 3) ||
	    check_cqe(&e[0], 3100, IBV_WC_SEND, a.qp->qp_num) ||
	    check_cqe(&e[1], 3101, IBV_WC_RDMA_WRITE, a.qp->qp_num) ||
	    check_cqe(&e[2], 3102, IBV_WC_RDMA_WRITE, a.qp->qp_num))
		goto out;
	if (poll_n(&b, e, 2) ||
	    check_recv(&e[0], 3000, IBV_WC_RECV, b.qp->qp_num, 500, false, 0) ||
	    check_recv(&e[1], 3001, IBV_WC_RECV_RDMA_WITH_IMM, b.qp->qp_num,
		       100, true, 0x0c0c0c0c) ||
	    check_bytes(b.buf + RECV0, a.buf + SRC + 3, 500, "UC SEND") ||
	    check_bytes(b.buf + WRITE_AT, a.buf + SRC + 600, 2000,
			"UC WRITE") ||
	    check_bytes(b.buf + WRITE_IMM_AT, a.buf + SRC + 3000, 100,
			"UC WRITE_IMM"))
		goto out;

	/* Lost without a word: no receive WQE, then a bad rkey. */
	memset(b.buf + READ_FROM, 0, 256);
	if (wr_send_one(&a, 3103, 0, 64) || poll_n(&a, e, 1) ||
	    check_cqe(&e[0], 3103, IBV_WC_SEND, a.qp->qp_num) ||
	    write_one(&a, b.mr->rkey + 0x1000, (uintptr_t)b.buf + READ_FROM,
		      0, 256, 3104) ||
	    quiet(&b))
		goto out;
	{
		static const uint8_t zero[256];

		if (check_bytes(b.buf + READ_FROM, zero, 256,
				"memory behind a bad rkey"))
			goto out;
	}
	/* The responder goes on. */
	if (post_recv(&b, 500, RECV0, 1024) || wr_send_one(&a, 3105, 1000, 77) ||
	    expect_only_send(&a, &b, 3105, 1000, 77))
		goto out;
	rc = 0;
out:
	side_destroy(&a);
	side_destroy(&b);
	return rc;
}

/* B's bound memory, 8 KiB: window 1 from MW_AT + 256, window 2 from + 4096. */
#define MW_AT		45056

/* One signaled READ of @len bytes from (@rkey, @raddr) to A's READ_TO. */
static int read_one(struct side *a, uint32_t rkey, uint64_t raddr,
		    uint32_t len, uint64_t wr_id)
{
	struct cqe e;

	ibv_wr_start(a->qpx);
	a->qpx->wr_id = wr_id;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(a->qpx, rkey, raddr);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf + READ_TO, len);
	if (ibv_wr_complete(a->qpx))
		return bad("ibv_wr_complete: %s", strerror(errno));
	if (poll_n(a, &e, 1) ||
	    check_cqe(&e, wr_id, IBV_WC_RDMA_READ, a->qp->qp_num))
		return -1;
	return 0;
}

/* The bind completion @wr_id on @b. */
static int bind_done(struct side *b, uint64_t wr_id)
{
	struct cqe e;

	return poll_n(b, &e, 1) ||
	       check_cqe(&e, wr_id, IBV_WC_BIND_MW, b->qp->qp_num) ? -1 : 0;
}

/*
 * Memory windows: a type 1 window bound with ibv_bind_mw, WRITE and READ
 * through it; a type 2 zero-based window bound with ibv_wr_bind_mw, a
 * WRITE, LOCAL_INV; bound again with ibv_post_send, invalidated by A's
 * SEND_WITH_INV; the MR stays while windows are bound; an invalidated
 * window refuses access.
 */
static int t_mw(struct dev *da, struct dev *db)
{
	struct ibv_device_attr_ex ax = {};
	struct ibv_mw *mw1 = NULL, *mw2 = NULL;
	struct ibv_send_wr wr = {}, *bad_wr;
	struct ibv_mw_bind b1 = {};
	struct ibv_mr *mr = NULL;
	uint8_t *w = NULL;
	struct side a, b;
	uint32_t k1, k2;
	struct cqe e;
	int rc = -1;

	if (side_create(&a, da, IBV_QPT_RC,
			RC_OPS | IBV_QP_EX_WITH_SEND_WITH_INV, NULL) ||
	    side_create(&b, db, IBV_QPT_RC,
			IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW |
				IBV_QP_EX_WITH_LOCAL_INV, NULL) ||
	    rc_connect(&a, &b))
		goto out;
	if (ibv_query_device_ex(db->ctx, NULL, &ax)) {
		bad("ibv_query_device_ex: %s", strerror(errno));
		goto out;
	}
	if (!(ax.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW) ||
	    !(ax.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) ||
	    ax.orig_attr.max_mw <= 0) {
		bad("%s: device_cap_flags %#x, max_mw %d: no windows",
		    db->name, ax.orig_attr.device_cap_flags,
		    ax.orig_attr.max_mw);
		goto out;
	}
	w = b.buf + MW_AT;
	mr = ibv_reg_mr(db->pd, w, 8192, ALL_ACCESS | IBV_ACCESS_MW_BIND);
	mw1 = ibv_alloc_mw(db->pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(db->pd, IBV_MW_TYPE_2);
	if (!mr || !mw1 || !mw2) {
		bad("ibv_reg_mr / ibv_alloc_mw: %s", strerror(errno));
		goto out;
	}
	fill(a.buf + SRC, 8192, 0x3d);
	fill(w, 8192, 0x77);

	/* Type 1: the window's key moves on with each bind. */
	k1 = mw1->rkey;
	b1.wr_id = 1400;
	b1.send_flags = IBV_SEND_SIGNALED;
	b1.bind_info.mr = mr;
	b1.bind_info.addr = (uintptr_t)w + 256;
	b1.bind_info.length = 4096;
	b1.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ;
	if (ibv_bind_mw(b.qp, mw1, &b1)) {
		bad("ibv_bind_mw: %s", strerror(errno));
		goto out;
	}
	if (bind_done(&b, 1400))
		goto out;
	if (mw1->rkey == k1) {
		bad("type 1 bind left the rkey at %#x", k1);
		goto out;
	}
	if (write_one(&a, mw1->rkey, (uintptr_t)w + 300, 0, 1000, 1401) ||
	    check_bytes(w + 300, a.buf + SRC, 1000, "WRITE through window 1") ||
	    read_one(&a, mw1->rkey, (uintptr_t)w + 2000, 500, 1402) ||
	    check_bytes(a.buf + READ_TO, w + 2000, 500,
			"READ through window 1"))
		goto out;

	/* Type 2, zero-based, bound in an ibv_wr batch. */
	k2 = ibv_inc_rkey(mw2->rkey);
	ibv_wr_start(b.qpx);
	b.qpx->wr_id = 1403;
	b.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(b.qpx, mw2, k2, &(struct ibv_mw_bind_info){
		.mr = mr, .addr = (uintptr_t)w + 4096, .length = 4096,
		.mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_ZERO_BASED });
	if (ibv_wr_complete(b.qpx)) {
		bad("ibv_wr_complete (bind): %s", strerror(errno));
		goto out;
	}
	/*
	 * ibverbs leaves a type 2 window's key to the application; rxe's
	 * kernel checks the next bind's idea of it (ibv_mw.rkey) against
	 * its own, so keep it current (this device names the window by the
	 * key's index only).
	 */
	mw2->rkey = k2;
	if (bind_done(&b, 1403) ||
	    write_one(&a, k2, 0x40, 1000, 300, 1404) ||
	    check_bytes(w + 4096 + 0x40, a.buf + SRC + 1000, 300,
			"WRITE through zero-based window 2"))
		goto out;

	/* The MR cannot go while windows are bound to it. */
	if (!ibv_dereg_mr(mr)) {
		mr = NULL;
		bad("ibv_dereg_mr of an MR with bound windows succeeded");
		goto out;
	}
	if (is_pvrdma(db) && errno != EBUSY) {
		bad("ibv_dereg_mr with bound windows: %s, expected EBUSY",
		    strerror(errno));
		goto out;
	}

	/* LOCAL_INV of window 2, bound again with ibv_post_send. */
	ibv_wr_start(b.qpx);
	b.qpx->wr_id = 1405;
	b.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_local_inv(b.qpx, k2);
	if (ibv_wr_complete(b.qpx) || poll_n(&b, &e, 1) ||
	    check_cqe(&e, 1405, IBV_WC_LOCAL_INV, b.qp->qp_num))
		goto out_why;
	k2 = ibv_inc_rkey(k2);
	wr.wr_id = 1406;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw2;
	wr.bind_mw.rkey = k2;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)w;
	wr.bind_mw.bind_info.length = 64;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	if (ibv_post_send(b.qp, &wr, &bad_wr)) {
		bad("ibv_post_send (bind): %s", strerror(errno));
		goto out;
	}
	mw2->rkey = k2;
	if (bind_done(&b, 1406) || read_one(&a, k2, (uintptr_t)w + 8, 56, 1407) ||
	    check_bytes(a.buf + READ_TO, w + 8, 56, "READ through window 2"))
		goto out;

	/* A's SEND_WITH_INV invalidates window 2 on B's side. */
	if (post_recv(&b, 1408, RECV0, 1024)) {
		bad("post_recv: %s", strerror(errno));
		goto out;
	}
	ibv_wr_start(a.qpx);
	a.qpx->wr_id = 1409;
	a.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(a.qpx, k2);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)a.buf + SRC, 32);
	if (ibv_wr_complete(a.qpx) || poll_n(&a, &e, 1) ||
	    check_cqe(&e, 1409, IBV_WC_SEND, a.qp->qp_num) ||
	    poll_n(&b, &e, 1) ||
	    check_cqe(&e, 1408, IBV_WC_RECV, b.qp->qp_num))
		goto out_why;
	/*
	 * rxe's extended CQ leaves IBV_WC_WITH_INV out of wc_flags (a bug
	 * of its): the key is then read as immediate data, byte-swapped.
	 */
	if (!is_pvrdma(db) && !(e.wc_flags & IBV_WC_WITH_INV) &&
	    e.imm == bswap_32(k2)) {
		printf("# %s: WITH_INV missing from wc_flags %#x\n", db->name,
		       e.wc_flags);
		e.wc_flags |= IBV_WC_WITH_INV;
		e.imm = k2;
	}
	if (!(e.wc_flags & IBV_WC_WITH_INV) || e.imm != k2) {
		bad("receive: wc_flags %#x invalidated rkey %#x, expected "
		    "WITH_INV %#x", e.wc_flags, e.imm, k2);
		goto out;
	}

	/* Window 1 unbound (length 0): now the MR can go. */
	b1.wr_id = 1410;
	b1.bind_info = (struct ibv_mw_bind_info){};
	if (!is_pvrdma(db)) {
		/* rxe's provider reads the MR of an unbind: give it one. */
		printf("# %s: unbind names the MR\n", db->name);
		b1.bind_info.mr = mr;
		b1.bind_info.addr = (uintptr_t)w;
	}
	if (ibv_bind_mw(b.qp, mw1, &b1) || bind_done(&b, 1410))
		goto out_why;
	if (ibv_dereg_mr(mr)) {
		bad("ibv_dereg_mr with every window unbound: %s",
		    strerror(errno));
		goto out;
	}
	mr = NULL;

	/* The invalidated key of window 2 no longer reads. */
	ibv_wr_start(a.qpx);
	a.qpx->wr_id = 1411;
	a.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(a.qpx, k2, (uintptr_t)w);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)a.buf + READ_TO, 8);
	if (ibv_wr_complete(a.qpx) || poll_n(&a, &e, 1))
		goto out_why;
	if (e.wr_id != 1411 || e.status != IBV_WC_REM_ACCESS_ERR) {
		bad("READ through an invalidated window: wr_id %" PRIu64
		    " status %s, expected REM_ACCESS_ERR", e.wr_id,
		    ibv_wc_status_str(e.status));
		goto out;
	}
	rc = 0;
	goto out;
out_why:
	if (!why[0])
		bad("%s", strerror(errno));
out:
	/* Windows first, then the MR they were bound to. */
	if (mw1)
		ibv_dealloc_mw(mw1);
	if (mw2)
		ibv_dealloc_mw(mw2);
	if (mr)
		ibv_dereg_mr(mr);
	side_destroy(&a);
	side_destroy(&b);
	return rc;
}

/*
 * Memory-window binds that ask for LOCAL_WRITE (which means nothing for a
 * window) succeed, type 1 through ibv_bind_mw and type 2 through
 * IBV_WR_BIND_MW; READ goes through, and a WRITE through a window bound
 * without REMOTE_WRITE fails with REM_ACCESS_ERR, writing nothing.
 */
static int t_mw_local_write(struct dev *da, struct dev *db)
{
	struct ibv_send_wr wr = {}, *bad_wr;
	struct ibv_mw *mw1 = NULL, *mw2 = NULL;
	struct ibv_mw_bind b1 = {};
	struct ibv_mr *mr = NULL;
	struct side a = {}, b = {};
	uint8_t *w;
	uint32_t k2;
	struct cqe e;
	int rc = -1;

	if (side_create(&a, da, IBV_QPT_RC, RC_OPS, NULL) ||
	    side_create(&b, db, IBV_QPT_RC,
			IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW, NULL) ||
	    rc_connect(&a, &b))
		goto out;
	w = b.buf + MW_AT;
	mr = ibv_reg_mr(db->pd, w, 8192, ALL_ACCESS | IBV_ACCESS_MW_BIND);
	mw1 = ibv_alloc_mw(db->pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(db->pd, IBV_MW_TYPE_2);
	if (!mr || !mw1 || !mw2) {
		bad("ibv_reg_mr / ibv_alloc_mw: %s", strerror(errno));
		goto out;
	}
	fill(w, 8192, 0x5a);
	fill(a.buf + SRC, 4096, 0x6b);
	b1.wr_id = 1500;
	b1.send_flags = IBV_SEND_SIGNALED;
	b1.bind_info.mr = mr;
	b1.bind_info.addr = (uintptr_t)w;
	b1.bind_info.length = 4096;
	b1.bind_info.mw_access_flags = IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_READ;
	if (ibv_bind_mw(b.qp, mw1, &b1)) {
		bad("ibv_bind_mw: %s", strerror(errno));
		goto out;
	}
	if (bind_done(&b, 1500) ||
	    read_one(&a, mw1->rkey, (uintptr_t)w + 100, 200, 1501) ||
	    check_bytes(a.buf + READ_TO, w + 100, 200, "READ through window 1"))
		goto out;
	k2 = ibv_inc_rkey(mw2->rkey);
	wr.wr_id = 1502;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw2;
	wr.bind_mw.rkey = k2;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)w + 4096;
	wr.bind_mw.bind_info.length = 4096;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_READ;
	if (ibv_post_send(b.qp, &wr, &bad_wr)) {
		bad("ibv_post_send (bind): %s", strerror(errno));
		goto out;
	}
	mw2->rkey = k2;
	if (bind_done(&b, 1502) ||
	    read_one(&a, k2, (uintptr_t)w + 4096 + 8, 300, 1503) ||
	    check_bytes(a.buf + READ_TO, w + 4096 + 8, 300,
			"READ through window 2"))
		goto out;
	/* No REMOTE_WRITE on window 1: a WRITE is refused, nothing moves. */
	ibv_wr_start(a.qpx);
	a.qpx->wr_id = 1504;
	a.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(a.qpx, mw1->rkey, (uintptr_t)w + 100);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)a.buf + SRC, 64);
	if (ibv_wr_complete(a.qpx) || poll_n(&a, &e, 1)) {
		if (!why[0])
			bad("%s", strerror(errno));
		goto out;
	}
	if (e.wr_id != 1504 || e.status != IBV_WC_REM_ACCESS_ERR) {
		bad("WRITE through a read-only window: wr_id %" PRIu64
		    " status %s, expected REM_ACCESS_ERR", e.wr_id,
		    ibv_wc_status_str(e.status));
		goto out;
	}
	fill(a.buf + READ_TO, 8192, 0x5a);	/* what w held */
	rc = check_bytes(w, a.buf + READ_TO, 8192,
			 "window memory after the refused WRITE");
out:
	if (mw1)
		ibv_dealloc_mw(mw1);
	if (mw2)
		ibv_dealloc_mw(mw2);
	if (mr)
		ibv_dereg_mr(mr);
	side_destroy(&a);
	side_destroy(&b);
	return rc;
}

/*
 * What applications set freely: QPs made through ibv_create_qp_ex with
 * IBV_QP_INIT_ATTR_CREATE_FLAGS and no flag (as without the bit), and
 * through ibv_create_qp, taken to INIT with access bits beyond remote
 * write/read/atomic (IBV_ACCESS_FLUSH_GLOBAL and _PERSISTENT, 0x100 and
 * 0x200; Debian 12's headers may lack the names); WRITE, READ and an
 * atomic then work. On this device a nonzero create flag is refused.
 */
static int t_qp_extras(struct dev *da, struct dev *db)
{
	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr qa = {
		.qp_state = IBV_QPS_INIT, .port_num = PORT,
		.qp_access_flags = 0x30e,
	};
	struct ibv_cq *cq = NULL;
	struct ibv_qp *qp = NULL;
	struct side a = {}, b = {};
	int rc = -1;

	with_create_flags = true;
	extra_qp_access = 0x300;
	rc = side_create(&a, da, IBV_QPT_RC, RC_OPS, NULL) ||
	     side_create(&b, db, IBV_QPT_RC, 0, NULL) || rc_connect(&a, &b);
	with_create_flags = false;
	extra_qp_access = 0;
	if (rc)
		goto out;
	rc = -1;
	fill(a.buf + SRC, 4096, 0x2c);
	memset(b.buf + ATOMIC_AT, 0, 8);
	if (write_one(&a, b.mr->rkey, (uintptr_t)b.buf + WRITE_AT, 0, 4096,
		      1600) ||
	    check_bytes(b.buf + WRITE_AT, a.buf + SRC, 4096, "WRITE") ||
	    read_one(&a, b.mr->rkey, (uintptr_t)b.buf + WRITE_AT + 10, 500,
		     1601) ||
	    check_bytes(a.buf + READ_TO, b.buf + WRITE_AT + 10, 500, "READ") ||
	    fetch_add_one(&a, b.mr->rkey, (uintptr_t)b.buf + ATOMIC_AT, 5,
			  1602, 0))
		goto out;

	cq = ibv_create_cq(da->ctx, 4, NULL, NULL, 0);
	qi.send_cq = qi.recv_cq = cq;
	qp = cq ? ibv_create_qp(da->pd, &qi) : NULL;
	if (!qp) {
		bad("ibv_create_qp: %s", strerror(errno));
		goto out;
	}
	if (ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		bad("RESET -> INIT with access %#x: %s", qa.qp_access_flags,
		    strerror(errno));
		goto out;
	}
	if (is_pvrdma(da)) {
		struct ibv_qp_init_attr_ex qx = {
			.qp_type = IBV_QPT_RC, .send_cq = cq, .recv_cq = cq,
			.cap = qi.cap, .pd = da->pd,
			.comp_mask = IBV_QP_INIT_ATTR_PD |
				     IBV_QP_INIT_ATTR_CREATE_FLAGS,
			.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB,
		};
		struct ibv_qp *q2 = ibv_create_qp_ex(da->ctx, &qx);

		if (q2 || errno != EOPNOTSUPP) {
			bad("create flag %#x: %s, expected EOPNOTSUPP",
			    qx.create_flags, q2 ? "made" : strerror(errno));
			if (q2)
				ibv_destroy_qp(q2);
			goto out;
		}
	}
	rc = 0;
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	side_destroy(&a);
	side_destroy(&b);
	return rc;
}

/* Wait for one async event of @type on @d's context, within the timeout. */
static int wait_event(struct dev *d, enum ibv_event_type type, void *obj)
{
	struct ibv_async_event ev;
	struct pollfd pfd = { .fd = d->ctx->async_fd, .events = POLLIN };
	uint64_t end = now_ms() + timeout_s * 1000;

	for (;;) {
		if (!ibv_get_async_event(d->ctx, &ev)) {
			enum ibv_event_type got = ev.event_type;
			void *o = ev.element.qp;

			ibv_ack_async_event(&ev);
			if (got == type && o == obj)
				return 0;
			if (got == IBV_EVENT_PORT_ACTIVE ||
			    got == IBV_EVENT_GID_CHANGE)
				continue;
			return bad("event %s, expected %s",
				   ibv_event_type_str(got),
				   ibv_event_type_str(type));
		}
		if (now_ms() > end)
			return bad("no %s event in %d s",
				   ibv_event_type_str(type), timeout_s);
		poll(&pfd, 1, 100);
	}
}


/* A group: ::ffff:239.4.5.6 (RoCE v2 multicast from IPv4). */
static const uint8_t mcast_gid[16] = { [10] = 0xff, [11] = 0xff,
				       239, 4, 5, 6 };

/* One datagram of @len bytes at SRC + @off from @s to the group. */
static int mcast_send_one(struct side *s, struct ibv_ah *ah, uint64_t wr_id,
			  uint32_t off, uint32_t len)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ah, .remote_qpn = 0xffffff,
			   .remote_qkey = QKEY },
	}, *bad_wr;
	struct cqe e;

	sge_at(s, &sge, SRC + off, len);
	if (ibv_post_send(s->qp, &wr, &bad_wr))
		return bad("post to the group: %s", strerror(errno));
	return poll_n(s, &e, 1) ||
	       check_cqe(&e, wr_id, IBV_WC_SEND, s->qp->qp_num);
}

/* @r got that datagram: every byte, and the group as the destination. */
static int mcast_got(struct side *s, struct side *r, uint64_t wr_id,
		     uint32_t off, uint32_t len)
{
	struct cqe e;

	if (poll_n(r, &e, 1) ||
	    check_recv(&e, wr_id, IBV_WC_RECV, r->qp->qp_num, GRH_LEN + len,
		       false, 0) ||
	    check_bytes(r->buf + RECV0 + GRH_LEN, s->buf + SRC + off, len,
			"datagram to the group"))
		return -1;
	/* RoCE v2 over IPv4: the IP header ends the 40 bytes, dst last. */
	return check_bytes(r->buf + RECV0 + GRH_LEN - 4, mcast_gid + 12, 4,
			   "the IPv4 destination");
}

/*
 * Multicast (a project extension on this device): two UD QPs attached to
 * a group (on db, and on da beside the sender) get a datagram to it (QPN
 * 0xFFFFFF, an AH to the group's GID), every byte and the destination
 * checked; a QP not attached gets nothing; after a detach, only the
 * member left; detaching twice is refused.
 */
static int t_mcast(struct dev *da, struct dev *db)
{
	struct ibv_ah_attr aa = {
		.is_global = 1, .port_num = PORT,
		.grh = { .sgid_index = da->gid_index, .hop_limit = 1 },
	};
	union ibv_gid g;
	struct side s = {}, r1 = {}, r2 = {}, r3 = {};
	struct ibv_ah *ah = NULL;
	struct ip_mreqn mr = { .imr_ifindex = 0 };
	int rc = -1, fd;

	if (!db->attr.max_mcast_grp) {
		if (is_pvrdma(db))
			return bad("max_mcast_grp 0: no multicast");
		printf("# %s: no multicast (max_mcast_grp 0)\n", db->name);
		return 0;
	}
	memcpy(g.raw, mcast_gid, 16);
	memcpy(aa.grh.dgid.raw, mcast_gid, 16);
	/*
	 * The host joins the IP group, as RDMA CM's rdma_join_multicast does
	 * on RoCE: Soft-RoCE's datagrams are UDP over IP and need it (our
	 * device does not).
	 */
	memcpy(&mr.imr_multiaddr, mcast_gid + 12, 4);
	{
		struct ibv_gid_entry ge;

		if (!ibv_query_gid_ex(db->ctx, PORT, db->gid_index, &ge, 0))
			mr.imr_ifindex = ge.ndev_ifindex;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr,
				 sizeof(mr)))
		return bad("IP_ADD_MEMBERSHIP: %s", strerror(errno));
	if (side_create(&s, da, IBV_QPT_UD, 0, NULL) ||
	    side_create(&r1, db, IBV_QPT_UD, 0, NULL) ||
	    side_create(&r2, da, IBV_QPT_UD, 0, NULL) ||
	    side_create(&r3, db, IBV_QPT_UD, 0, NULL) ||
	    ud_ready(&s, &r1) || ud_ready(&r1, &s) || ud_ready(&r2, &s) ||
	    ud_ready(&r3, &s))
		goto out;
	ah = ibv_create_ah(da->pd, &aa);
	if (!ah) {
		bad("ibv_create_ah to the group: %s", strerror(errno));
		goto out;
	}
	if (ibv_attach_mcast(r1.qp, &g, 0) || ibv_attach_mcast(r2.qp, &g, 0)) {
		bad("ibv_attach_mcast: %s", strerror(errno));
		goto out;
	}
	fill(s.buf + SRC, 4096, 0x6d);
	if (post_recv(&r1, 1400, RECV0, 1024) ||
	    post_recv(&r2, 1401, RECV0, 1024) ||
	    post_recv(&r3, 1402, RECV0, 1024)) {
		bad("post_recv: %s", strerror(errno));
		goto out;
	}
	if (mcast_send_one(&s, ah, 1410, 100, 700) ||
	    mcast_got(&s, &r1, 1400, 100, 700) ||
	    mcast_got(&s, &r2, 1401, 100, 700) || quiet(&r3))
		goto out;
	if (ibv_detach_mcast(r1.qp, &g, 0)) {
		bad("ibv_detach_mcast: %s", strerror(errno));
		goto out;
	}
	if (!ibv_detach_mcast(r1.qp, &g, 0)) {
		bad("a second detach was taken");
		goto out;
	}
	if (post_recv(&r1, 1403, RECV0, 1024) ||
	    post_recv(&r2, 1404, RECV0, 1024)) {
		bad("post_recv: %s", strerror(errno));
		goto out;
	}
	if (mcast_send_one(&s, ah, 1411, 900, 64) ||
	    mcast_got(&s, &r2, 1404, 900, 64) || quiet(&r1))
		goto out;
	rc = ibv_detach_mcast(r2.qp, &g, 0) ?
	     bad("ibv_detach_mcast: %s", strerror(errno)) : 0;
out:
	if (ah)
		ibv_destroy_ah(ah);
	side_destroy(&s);
	side_destroy(&r1);
	side_destroy(&r2);
	side_destroy(&r3);
	close(fd);
	return rc;
}

/* One completion of classic @cq within the timeout, into @wc. */
static int xrc_poll(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	uint64_t end = now_ms() + (uint64_t)timeout_s * 1000;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && now_ms() < end)
		;
	if (n < 0)
		return bad("%s: ibv_poll_cq: %d", what, n);
	if (n == 0)
		return bad("%s: no completion in %d s", what, timeout_s);
	if (wc->status != IBV_WC_SUCCESS)
		return bad("%s: wr_id %llu status %s", what,
			   (unsigned long long)wc->wr_id,
			   ibv_wc_status_str(wc->status));
	return 0;
}

/* A receive of an XRC SRQ: its fields name the XRC_RECV QP and sender. */
static int xrc_recv_ok(struct ibv_cq *cq, uint64_t wr_id,
		       enum ibv_wc_opcode op, uint32_t len, uint32_t qp_num,
		       uint32_t src_qp, bool imm)
{
	struct ibv_wc wc;

	if (xrc_poll(cq, &wc, "XRC receive"))
		return -1;
	if (wc.wr_id != wr_id || wc.opcode != op || wc.byte_len != len ||
	    wc.qp_num != qp_num || wc.src_qp != src_qp ||
	    !!(wc.wc_flags & IBV_WC_WITH_IMM) != imm ||
	    (imm && be32toh(wc.imm_data) != 0x5a5a1234))
		return bad("XRC receive: wr_id %llu opcode %d len %u qp_num "
			   "%#x src_qp %#x flags %#x, expected %llu %d %u %#x "
			   "%#x", (unsigned long long)wc.wr_id, wc.opcode,
			   wc.byte_len, wc.qp_num, wc.src_qp, wc.wc_flags,
			   (unsigned long long)wr_id, op, len, qp_num, src_qp);
	return 0;
}

/*
 * XRC (IBV_DEVICE_XRC; a project extension on this device). One XRC
 * domain opened by file in two contexts of the peer device (two
 * processes' worth: the kernel hands both the same domain), an XRC SRQ
 * in each context with its own CQ and PD, one XRC_RECV QP made in the
 * first context and opened by number in the second (ibv_open_qp), an
 * XRC_SEND QP connected to it: a SEND to one SRQ, a SEND_WITH_IMM to the
 * other, an RDMA WRITE with the extended API naming the first, every
 * byte and completion field checked; receives are refused on the
 * XRC_SEND QP and the domain cannot close while it is used. A device
 * without XRC (Soft-RoCE) must refuse ibv_open_xrcd.
 */
static int t_xrc(struct dev *da, struct dev *db)
{
	char path[] = "/tmp/verbs_ex_xrcd.XXXXXX";
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.oflags = O_CREAT,
	};
	struct ibv_device **list = NULL;
	struct ibv_context *c2 = NULL;
	struct ibv_xrcd *x1 = NULL, *x2 = NULL;
	struct ibv_pd *pd2 = NULL;
	struct ibv_cq *cqs = NULL, *cq1 = NULL, *cq2 = NULL;
	struct ibv_srq *srq1 = NULL, *srq2 = NULL;
	struct ibv_qp *ini = NULL, *tgt = NULL, *tgt2 = NULL;
	struct ibv_mr *ma = NULL, *m1 = NULL, *m2 = NULL;
	uint8_t *ba = NULL, *b1 = NULL, *b2 = NULL;
	uint32_t n1 = 0, n2 = 0;
	struct ibv_qp_attr at;
	struct ibv_wc wc;
	int rc = -1, fd, i;

	fd = mkstemp(path);
	if (fd < 0)
		return bad("mkstemp: %s", strerror(errno));
	unlink(path);
	xa.fd = fd;
	if (!(db->attr.device_cap_flags & IBV_DEVICE_XRC)) {
		x1 = ibv_open_xrcd(db->ctx, &xa);
		if (x1) {
			rc = bad("no IBV_DEVICE_XRC, yet ibv_open_xrcd worked");
			goto out;
		}
		if (is_pvrdma(db)) {
			rc = bad("IBV_DEVICE_XRC not set (ibv_open_xrcd: %s)",
				 strerror(errno));
			goto out;
		}
		printf("# %s: no XRC (ibv_open_xrcd: %s)\n", db->name,
		       strerror(errno));
		rc = 0;
		goto out;
	}
	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), db->name))
			c2 = ibv_open_device(list[i]);
	x1 = ibv_open_xrcd(db->ctx, &xa);
	xa.oflags = 0;
	x2 = c2 ? ibv_open_xrcd(c2, &xa) : NULL;
	if (!c2 || !x1 || !x2) {
		bad("a second context or ibv_open_xrcd: %s", strerror(errno));
		goto out;
	}
	pd2 = ibv_alloc_pd(c2);
	cqs = ibv_create_cq(da->ctx, 8, NULL, NULL, 0);
	cq1 = ibv_create_cq(db->ctx, 8, NULL, NULL, 0);
	cq2 = ibv_create_cq(c2, 8, NULL, NULL, 0);
	ba = aligned_alloc(4096, 4 * 4096);
	b1 = aligned_alloc(4096, 4 * 4096);
	b2 = aligned_alloc(4096, 4 * 4096);
	if (!pd2 || !cqs || !cq1 || !cq2 || !ba || !b1 || !b2) {
		bad("PD, CQs or buffers: %s", strerror(errno));
		goto out;
	}
	memset(b1, 0, 4 * 4096);
	memset(b2, 0, 4 * 4096);
	fill(ba, 4 * 4096, 0x31);
	ma = ibv_reg_mr(da->pd, ba, 4 * 4096, ALL_ACCESS);
	m1 = ibv_reg_mr(db->pd, b1, 4 * 4096, ALL_ACCESS);
	m2 = ibv_reg_mr(pd2, b2, 4 * 4096, ALL_ACCESS);
	if (!ma || !m1 || !m2) {
		bad("ibv_reg_mr: %s", strerror(errno));
		goto out;
	}
	{
		struct ibv_srq_init_attr_ex sa = {
			.attr = { .max_wr = 8, .max_sge = 1 },
			.comp_mask = IBV_SRQ_INIT_ATTR_TYPE |
				     IBV_SRQ_INIT_ATTR_PD |
				     IBV_SRQ_INIT_ATTR_XRCD |
				     IBV_SRQ_INIT_ATTR_CQ,
			.srq_type = IBV_SRQT_XRC,
			.pd = db->pd, .xrcd = x1, .cq = cq1,
		};

		srq1 = ibv_create_srq_ex(db->ctx, &sa);
		sa.pd = pd2;
		sa.xrcd = x2;
		sa.cq = cq2;
		srq2 = ibv_create_srq_ex(c2, &sa);
	}
	if (!srq1 || !srq2 || ibv_get_srq_num(srq1, &n1) ||
	    ibv_get_srq_num(srq2, &n2) || n1 == n2) {
		bad("XRC SRQs and their numbers (%u, %u): %s", n1, n2,
		    strerror(errno));
		goto out;
	}
	{
		struct ibv_qp_init_attr_ex qa = {
			.qp_type = IBV_QPT_XRC_RECV,
			.comp_mask = IBV_QP_INIT_ATTR_XRCD,
			.xrcd = x1,
		};
		struct ibv_qp_open_attr oa = {
			.comp_mask = IBV_QP_OPEN_ATTR_NUM |
				     IBV_QP_OPEN_ATTR_XRCD |
				     IBV_QP_OPEN_ATTR_TYPE,
			.qp_type = IBV_QPT_XRC_RECV,
			.xrcd = x2,
		};

		tgt = ibv_create_qp_ex(db->ctx, &qa);
		if (!tgt) {
			bad("XRC_RECV QP: %s", strerror(errno));
			goto out;
		}
		oa.qp_num = tgt->qp_num;
		/* Only in the same domain: the second context's handle. */
		tgt2 = ibv_open_qp(c2, &oa);
		if (!tgt2) {
			bad("ibv_open_qp of XRC_RECV QP %#x in the second "
			    "context: %s", tgt->qp_num, strerror(errno));
			goto out;
		}
		qa = (struct ibv_qp_init_attr_ex) {
			.qp_type = IBV_QPT_XRC_SEND,
			.send_cq = cqs,
			.cap = { .max_send_wr = 8, .max_send_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD |
				     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = da->pd,
			.send_ops_flags = IBV_QP_EX_WITH_SEND |
					  IBV_QP_EX_WITH_RDMA_WRITE,
		};
		ini = ibv_create_qp_ex(da->ctx, &qa);
		if (!ini) {
			bad("XRC_SEND QP: %s", strerror(errno));
			goto out;
		}
	}
	/* INIT, RTR, RTS (XRC_RECV: RTR is enough to receive). */
	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.port_num = PORT;
	at.qp_access_flags = ALL_ACCESS;
	if (ibv_modify_qp(ini, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
	    ibv_modify_qp(tgt, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		bad("INIT: %s", strerror(errno));
		goto out;
	}
	{
		struct side si = { .dev = da, .qp = ini };
		struct side st = { .dev = db, .qp = tgt };

		rtr_attr(&si, &st, PSN_B, &at);
		if (ibv_modify_qp(ini, &at, IBV_QP_STATE | IBV_QP_AV |
				  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN)) {
			bad("XRC_SEND RTR: %s", strerror(errno));
			goto out;
		}
		rts_attr(PSN_A, &at);
		if (ibv_modify_qp(ini, &at, RTS_MASK)) {
			bad("XRC_SEND RTS: %s", strerror(errno));
			goto out;
		}
		rtr_attr(&st, &si, PSN_A, &at);
		if (ibv_modify_qp(tgt, &at, RTR_MASK)) {
			bad("XRC_RECV RTR: %s", strerror(errno));
			goto out;
		}
	}
	/* Receives: one in each SRQ; none on the XRC_SEND QP. */
	{
		struct ibv_sge r1 = { (uintptr_t)b1, 1024, m1->lkey };
		struct ibv_sge r2 = { (uintptr_t)b2, 1024, m2->lkey };
		struct ibv_recv_wr w1 = { .wr_id = 71, .sg_list = &r1,
					  .num_sge = 1 };
		struct ibv_recv_wr w2 = { .wr_id = 72, .sg_list = &r2,
					  .num_sge = 1 }, *bw;

		if (ibv_post_srq_recv(srq1, &w1, &bw) ||
		    ibv_post_srq_recv(srq2, &w2, &bw)) {
			bad("ibv_post_srq_recv: %s", strerror(errno));
			goto out;
		}
		if (!ibv_post_recv(ini, &w1, &bw)) {
			bad("a receive was posted on an XRC_SEND QP");
			goto out;
		}
	}
	/* SEND to SRQ 1, SEND_WITH_IMM to SRQ 2 (classic post). */
	{
		struct ibv_sge s1 = { (uintptr_t)ba, 300, ma->lkey };
		struct ibv_sge s2 = { (uintptr_t)ba + 4096, 200, ma->lkey };
		struct ibv_send_wr w1 = {
			.wr_id = 81, .sg_list = &s1, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		}, w2 = {
			.wr_id = 82, .sg_list = &s2, .num_sge = 1,
			.opcode = IBV_WR_SEND_WITH_IMM,
			.send_flags = IBV_SEND_SIGNALED,
			.imm_data = htobe32(0x5a5a1234),
		}, *bw;

		w1.qp_type.xrc.remote_srqn = n1;
		w2.qp_type.xrc.remote_srqn = n2;
		w1.next = &w2;
		if (ibv_post_send(ini, &w1, &bw)) {
			bad("ibv_post_send: %s", strerror(errno));
			goto out;
		}
	}
	if (xrc_poll(cqs, &wc, "SEND") || xrc_poll(cqs, &wc, "SEND_WITH_IMM") ||
	    xrc_recv_ok(cq1, 71, IBV_WC_RECV, 300, tgt->qp_num, ini->qp_num,
			false) ||
	    xrc_recv_ok(cq2, 72, IBV_WC_RECV, 200, tgt->qp_num, ini->qp_num,
			true))
		goto out;
	if (memcmp(b1, ba, 300) || memcmp(b2, ba + 4096, 200)) {
		bad("the SENDs' bytes differ");
		goto out;
	}
	/* An RDMA WRITE with the extended API, the SRQ of m1's PD named. */
	{
		struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(ini);

		ibv_wr_start(qx);
		qx->wr_id = 83;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(qx, m1->rkey, (uintptr_t)b1 + 8192);
		ibv_wr_set_xrc_srqn(qx, n1);
		ibv_wr_set_sge(qx, ma->lkey, (uintptr_t)ba + 8192, 3000);
		if (ibv_wr_complete(qx)) {
			bad("ibv_wr_complete: %s", strerror(errno));
			goto out;
		}
	}
	if (xrc_poll(cqs, &wc, "RDMA WRITE"))
		goto out;
	if (wc.wr_id != 83 || wc.opcode != IBV_WC_RDMA_WRITE ||
	    memcmp(b1 + 8192, ba + 8192, 3000)) {
		bad("RDMA WRITE: wr_id %llu opcode %d, or bytes differ",
		    (unsigned long long)wc.wr_id, wc.opcode);
		goto out;
	}
	/* In use: the domain stays (the kernel counts its SRQs and QPs). */
	if (!ibv_close_xrcd(x2)) {
		x2 = NULL;
		bad("ibv_close_xrcd of a domain in use worked");
		goto out;
	}
	rc = 0;
out:
	if (tgt2)
		ibv_destroy_qp(tgt2);
	if (tgt)
		ibv_destroy_qp(tgt);
	if (ini)
		ibv_destroy_qp(ini);
	if (srq1)
		ibv_destroy_srq(srq1);
	if (srq2)
		ibv_destroy_srq(srq2);
	/* Unused now: both handles close (the domain goes with the last). */
	if (x1 && ibv_close_xrcd(x1) && rc == 0)
		rc = bad("ibv_close_xrcd of an unused domain: %s",
			 strerror(errno));
	if (x2 && ibv_close_xrcd(x2) && rc == 0)
		rc = bad("ibv_close_xrcd of an unused domain: %s",
			 strerror(errno));
	if (ma)
		ibv_dereg_mr(ma);
	if (m1)
		ibv_dereg_mr(m1);
	if (m2)
		ibv_dereg_mr(m2);
	if (cqs)
		ibv_destroy_cq(cqs);
	if (cq1)
		ibv_destroy_cq(cq1);
	if (cq2)
		ibv_destroy_cq(cq2);
	if (pd2)
		ibv_dealloc_pd(pd2);
	if (c2)
		ibv_close_device(c2);
	if (list)
		ibv_free_device_list(list);
	free(ba);
	free(b1);
	free(b2);
	close(fd);
	return rc;
}

/* IB_UVERBS_DEVICE_ATOMIC_WRITE of device_cap_flags_ex (rdma/ib_user_verbs.h). */
#define DEVICE_ATOMIC_WRITE	(1ULL << 40)

/* One signaled ATOMIC_WRITE of @v to (@rkey, @raddr) through ibv_wr_*. */
static int atomic_write_one(struct side *a, uint32_t rkey, uint64_t raddr,
			    const uint8_t v[8], uint64_t wr_id)
{
	ibv_wr_start(a->qpx);
	a->qpx->wr_id = wr_id;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(a->qpx, rkey, raddr, v);
	return ibv_wr_complete(a->qpx);
}

/*
 * ATOMIC_WRITE (ibv_wr_atomic_write; a project extension on this device):
 * where the device says IB_UVERBS_DEVICE_ATOMIC_WRITE, its 8 bytes land
 * on the peer's aligned word and nothing around it changes, no receive is
 * taken, the completion is IBV_WC_ATOMIC_WRITE; behind an RDMA WRITE to
 * the same word in one batch it lands last; a QP made without the op
 * cannot post it; a misaligned one fails with a remote invalid request.
 */
static int t_atomic_write(struct dev *da, struct dev *db)
{
	static const uint8_t v1[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	static const uint8_t v2[8] = { 0xf8, 0xe7, 0xd6, 0xc5, 0xb4, 0xa3,
				       0x92, 0x81 };
	struct ibv_device_attr_ex ax = {};
	uint8_t was[48], *word;
	struct side a, b, c, d;
	struct cqe e[2];
	int rc = -1;

	if (ibv_query_device_ex(da->ctx, NULL, &ax))
		return bad("ibv_query_device_ex: %s", strerror(errno));
	if (!(ax.device_cap_flags_ex & DEVICE_ATOMIC_WRITE)) {
		if (is_pvrdma(da))
			return bad("no IB_UVERBS_DEVICE_ATOMIC_WRITE");
		printf("# %s: no atomic write (device_cap_flags_ex)\n",
		       da->name);
		return 0;
	}
	memset(&c, 0, sizeof(c));
	memset(&d, 0, sizeof(d));
	if (side_create(&a, da, IBV_QPT_RC,
			RC_OPS | IBV_QP_EX_WITH_ATOMIC_WRITE, NULL) ||
	    side_create(&b, db, IBV_QPT_RC, 0, NULL) || rc_connect(&a, &b))
		goto out;
	word = b.buf + ATOMIC_AT;
	fill(word - 16, sizeof(was), 0x21);
	memcpy(was, word - 16, sizeof(was));
	if (post_recv(&b, 1299, RECV0, 64) ||
	    atomic_write_one(&a, b.mr->rkey, (uintptr_t)word, v1, 1300)) {
		bad("post: %s", strerror(errno));
		goto out;
	}
	if (poll_n(&a, e, 1) ||
	    check_cqe(&e[0], 1300, IBV_WC_ATOMIC_WRITE, a.qp->qp_num) ||
	    check_bytes(word, v1, 8, "the word") ||
	    check_bytes(word - 16, was, 16, "before the word") ||
	    check_bytes(word + 8, was + 24, 24, "after the word") ||
	    quiet(&b))
		goto out;

	/* An RDMA WRITE, then an ATOMIC_WRITE, of the next word. */
	fill(a.buf + SRC, 8, 0x5e);
	ibv_wr_start(a.qpx);
	a.qpx->wr_id = 1301;
	a.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(a.qpx, b.mr->rkey, (uintptr_t)word + 8);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)a.buf + SRC, 8);
	a.qpx->wr_id = 1302;
	ibv_wr_atomic_write(a.qpx, b.mr->rkey, (uintptr_t)word + 8, v2);
	if (ibv_wr_complete(a.qpx)) {
		bad("batch: %s", strerror(errno));
		goto out;
	}
	if (poll_n(&a, e, 2) ||
	    check_cqe(&e[0], 1301, IBV_WC_RDMA_WRITE, a.qp->qp_num) ||
	    check_cqe(&e[1], 1302, IBV_WC_ATOMIC_WRITE, a.qp->qp_num) ||
	    check_bytes(word + 8, v2, 8, "the word after WRITE + ATOMIC_WRITE"))
		goto out;

	/*
	 * Not among the QP's send ops: our provider refuses it, nothing
	 * posted (ibverbs leaves the call undefined: rxe's is NULL).
	 */
	if (is_pvrdma(da) &&
	    (side_create(&c, da, IBV_QPT_RC, RC_OPS, NULL) ||
	     side_create(&d, db, IBV_QPT_RC, 0, NULL) || rc_connect(&c, &d)))
		goto out;
	if (is_pvrdma(da) &&
	    (atomic_write_one(&c, d.mr->rkey, (uintptr_t)d.buf, v2, 1303) !=
	     EINVAL || quiet(&c))) {
		bad("ATOMIC_WRITE on a QP created without it: not EINVAL");
		goto out;
	}

	if (atomic_write_one(&a, b.mr->rkey, (uintptr_t)word + 20, v2,
			     1304)) {
		bad("post: %s", strerror(errno));
		goto out;
	}
	if (poll_n(&a, e, 1))
		goto out;
	if (e[0].wr_id != 1304 || e[0].status != IBV_WC_REM_INV_REQ_ERR) {
		bad("misaligned: wr_id %" PRIu64 " status %s, expected remote "
		    "invalid request", e[0].wr_id,
		    ibv_wc_status_str(e[0].status));
		goto out;
	}
	rc = check_bytes(word + 16, was + 32, 16, "around a misaligned one");
out:
	side_destroy(&a);
	side_destroy(&b);
	side_destroy(&c);
	side_destroy(&d);
	return rc;
}

/*
 * Parent domains: what the allocator of t_parent_domain's domains saw.
 * mode: hand out memory (filled with garbage: the provider must clear
 * it), answer IBV_ALLOCATOR_USE_DEFAULT, or fail.
 */
enum { PAD_GIVE, PAD_DEFAULT, PAD_FAIL };
#define PAD_LIVE	16
/* Our provider's resource types (docs/architecture.md): driver id 10. */
#define PAD_RES_TYPE(n)	((uint64_t)10 << 32 | (n))

struct pad_ctx {
	struct ibv_pd *pad;		/* what the callbacks must be given */
	int mode;
	int allocs, frees, defaults, bad;
	unsigned int types;		/* bit n: PAD_RES_TYPE(n) asked */
	struct {
		void *p;
		uint64_t type;
	} live[PAD_LIVE];
};

static void *pad_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t type)
{
	struct pad_ctx *c = pd_context;
	void *p;
	int i;

	if (pd != c->pad || alignment < 4096 ||
	    (alignment & (alignment - 1)) || size % 4096 ||
	    type >> 32 != 10 || (type & 0xffffffff) < 1 ||
	    (type & 0xffffffff) > 5)
		c->bad++;
	else
		c->types |= 1u << (type & 31);
	if (c->mode == PAD_DEFAULT) {
		c->defaults++;
		return IBV_ALLOCATOR_USE_DEFAULT;
	}
	if (c->mode == PAD_FAIL)
		return NULL;
	for (i = 0; i < PAD_LIVE && c->live[i].p; i++)
		;
	if (i == PAD_LIVE || !(p = aligned_alloc(alignment, size))) {
		c->bad++;
		return NULL;
	}
	memset(p, 0x5a, size);
	c->live[i].p = p;
	c->live[i].type = type;
	c->allocs++;
	return p;
}

static void pad_free(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t type)
{
	struct pad_ctx *c = pd_context;
	int i;

	for (i = 0; i < PAD_LIVE; i++)
		if (c->live[i].p == ptr)
			break;
	if (pd != c->pad || i == PAD_LIVE || c->live[i].type != type) {
		c->bad++;
		return;
	}
	c->live[i].p = NULL;
	free(ptr);
	c->frees++;
}

static struct ibv_pd *pad_new(struct dev *d, struct ibv_td *td,
			      struct pad_ctx *c, int mode)
{
	struct ibv_parent_domain_init_attr pa = {
		.pd = d->pd, .td = td,
		.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
		.alloc = pad_alloc, .free = pad_free, .pd_context = c,
	};

	memset(c, 0, sizeof(*c));
	c->mode = mode;
	c->pad = ibv_alloc_parent_domain(d->ctx, &pa);
	return c->pad;
}

/* ibv_alloc_parent_domain's refusals (EINVAL each). */
static int pad_refusals(struct dev *d, struct ibv_pd *pad)
{
	struct ibv_parent_domain_init_attr pa = { .pd = d->pd };
	struct ibv_td_init_attr ta = { .comp_mask = 1 };
	struct ibv_cq_init_attr_ex ca = {
		.cqe = DEPTH, .wc_flags = WC_FIELDS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD, .parent_domain = d->pd,
	};
	const char *what = NULL;
	struct ibv_pd *p;

	if (ibv_alloc_td(d->ctx, &ta) || errno != EINVAL)
		return bad("ibv_alloc_td with comp_mask 1: not EINVAL");
	pa.comp_mask = 1u << 7;
	if ((p = ibv_alloc_parent_domain(d->ctx, &pa)) || errno != EINVAL)
		what = "an unknown comp_mask bit";
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
	pa.alloc = pad_alloc;
	if (!what &&
	    ((p = ibv_alloc_parent_domain(d->ctx, &pa)) || errno != EINVAL))
		what = "an allocator without free";
	pa.comp_mask = 0;
	pa.pd = pad;
	if (!what &&
	    ((p = ibv_alloc_parent_domain(d->ctx, &pa)) || errno != EINVAL))
		what = "a parent domain for its PD";
	if (what) {
		if (p)
			ibv_dealloc_pd(p);
		return bad("ibv_alloc_parent_domain with %s: not EINVAL",
			   what);
	}
	if (ibv_create_cq_ex(d->ctx, &ca) || errno != EINVAL)
		return bad("a CQ with a PD for parent domain: not EINVAL");
	return 0;
}

/*
 * Parent and thread domains (provider only): a QP, its CQ (resized), an
 * SRQ (resized where the device can) and MRs in a parent domain with a
 * thread domain and allocators carry verified SENDs, an inline SEND and
 * an RDMA WRITE; every queue buffer comes from the allocator, cleared,
 * with the PD, context, alignment and a resource type of ours, and goes
 * back to it with its type; the PD, the thread domain and the parent
 * domain cannot go while used. A domain whose allocator says "use the
 * default" and one whose allocator fails; the refusals. Where the
 * provider has no parent domains (Soft-RoCE), EOPNOTSUPP is the answer.
 */
static int t_parent_domain(struct dev *da, struct dev *db)
{
	struct ibv_srq_init_attr si = { .attr = { .max_wr = DEPTH,
						  .max_sge = 1 } };
	struct ibv_srq_attr sa = { .max_wr = 2 * DEPTH };
	struct ibv_td_init_attr ta = {};
	struct pad_ctx c, c2;
	struct ibv_pd *pad = NULL, *pad2;
	struct ibv_srq *srq = NULL;
	struct side a = {}, b = {};
	struct ibv_td *td;
	struct cqe e;
	int rc = -1;

	td = ibv_alloc_td(db->ctx, &ta);
	if (!td && !is_pvrdma(db) && errno == EOPNOTSUPP) {
		printf("# %s: no thread domains (EOPNOTSUPP)\n", db->name);
		return 0;
	}
	if (!td)
		return bad("ibv_alloc_td: %s", strerror(errno));
	if (!pad_new(db, td, &c, PAD_GIVE)) {
		bad("ibv_alloc_parent_domain: %s", strerror(errno));
		goto out;
	}
	pad = c.pad;
	if (pad_refusals(db, pad))
		goto out;

	side_pad = pad;
	rc = side_create(&b, db, IBV_QPT_RC, RC_OPS, NULL);
	side_pad = NULL;
	if (rc)
		goto out;
	rc = -1;
	srq = ibv_create_srq(pad, &si);
	if (!srq) {
		bad("ibv_create_srq(parent domain): %s", strerror(errno));
		goto out;
	}
	if (c.allocs != 5 || c.types != 0x3e) {
		bad("%d allocations of types %#x, expected 5 of 0x3e (CQ, "
		    "SQ, RQ, SRQ, inline)", c.allocs, c.types);
		goto out;
	}
	if (ibv_dealloc_pd(db->pd) != EBUSY || ibv_dealloc_td(td) != EBUSY ||
	    ibv_dealloc_pd(pad) != EBUSY) {
		bad("the PD, thread domain or parent domain went while used");
		goto out;
	}
	if (side_create(&a, da, IBV_QPT_RC, RC_OPS, NULL) ||
	    rc_connect(&a, &b))
		goto out;

	fill(a.buf + SRC, 4096, 0x3c);
	if (sends_pending(&a, &b, 3, 100) || recvs_arrived(&a, &b, 3))
		goto out;
	if (ibv_resize_cq(ibv_cq_ex_to_cq(b.cq), 3 * DEPTH)) {
		bad("ibv_resize_cq: %s", strerror(errno));
		goto out;
	}
	if ((db->attr.device_cap_flags & IBV_DEVICE_SRQ_RESIZE) &&
	    ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR)) {
		bad("ibv_modify_srq(IBV_SRQ_MAX_WR): %s", strerror(errno));
		goto out;
	}
	fill(a.buf + SRC, 4096, 0x4d);
	if (sends_pending(&a, &b, 3, 110) || recvs_arrived(&a, &b, 3))
		goto out;
	/* B writes to A, and sends inline. */
	fill(b.buf + SRC, 4096, 0x77);
	if (write_one(&b, a.mr->rkey, (uintptr_t)a.buf + WRITE_AT, 0, 1500,
		      120) ||
	    check_bytes(a.buf + WRITE_AT, b.buf + SRC, 1500, "WRITE"))
		goto out;
	if (post_recv(&a, 121, RECV0, 64)) {
		bad("post_recv: %s", strerror(errno));
		goto out;
	}
	ibv_wr_start(b.qpx);
	b.qpx->wr_id = 122;
	b.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(b.qpx);
	ibv_wr_set_inline_data(b.qpx, b.buf + SRC + 7, 48);
	if (ibv_wr_complete(b.qpx)) {
		bad("inline SEND: %s", strerror(errno));
		goto out;
	}
	if (poll_n(&b, &e, 1) ||
	    check_cqe(&e, 122, IBV_WC_SEND, b.qp->qp_num) ||
	    poll_n(&a, &e, 1) ||
	    check_recv(&e, 121, IBV_WC_RECV, a.qp->qp_num, 48, false, 0) ||
	    check_bytes(a.buf + RECV0, b.buf + SRC + 7, 48, "inline SEND"))
		goto out;
	{
		int resized = 1 + !!(db->attr.device_cap_flags &
				     IBV_DEVICE_SRQ_RESIZE);

		if (c.allocs != 5 + resized || c.frees != resized || c.bad) {
			bad("after the resizes: %d allocations, %d frees, %d "
			    "bad calls; expected %d, %d, 0", c.allocs,
			    c.frees, c.bad, 5 + resized, resized);
			goto out;
		}
	}
	side_destroy(&b);
	ibv_destroy_srq(srq);
	srq = NULL;
	if (c.frees != c.allocs || c.bad) {
		bad("%d allocations, %d frees, %d bad calls", c.allocs,
		    c.frees, c.bad);
		goto out;
	}

	/* "Use the default", then failure, in domains without a TD. */
	if (!pad_new(db, NULL, &c2, PAD_DEFAULT)) {
		bad("ibv_alloc_parent_domain: %s", strerror(errno));
		goto out;
	}
	side_pad = c2.pad;
	rc = side_create(&b, db, IBV_QPT_RC, 0, NULL);
	side_pad = NULL;
	side_destroy(&b);
	pad2 = c2.pad;
	if (rc || c2.defaults != 4 || c2.allocs || c2.frees || c2.bad) {
		bad("default allocator: %s; %d defaults, %d allocations, %d "
		    "frees, %d bad", rc ? why : "created", c2.defaults,
		    c2.allocs, c2.frees, c2.bad);
		rc = -1;
		ibv_dealloc_pd(pad2);
		goto out;
	}
	rc = -1;
	c2.mode = PAD_FAIL;
	side_pad = pad2;
	if (cq_ex_create(db) || errno != ENOMEM) {
		side_pad = NULL;
		bad("a CQ whose allocator failed: not ENOMEM");
		ibv_dealloc_pd(pad2);
		goto out;
	}
	side_pad = NULL;
	if (ibv_dealloc_pd(pad2)) {
		bad("ibv_dealloc_pd(parent domain): %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	side_destroy(&a);
	side_destroy(&b);
	if (srq)
		ibv_destroy_srq(srq);
	if (pad && ibv_dealloc_pd(pad) && !rc)
		rc = bad("ibv_dealloc_pd(parent domain) after use failed");
	if (ibv_dealloc_td(td) && !rc)
		rc = bad("ibv_dealloc_td after use failed");
	return rc;
}

/*
 * The SRQ limit: set by ibv_modify_srq, read back, the event once fewer
 * WQEs than the limit are left, and the limit disarmed (0) after it.
 */
static int t_srq_limit(struct dev *da, struct dev *db)
{
	struct ibv_srq_init_attr si = { .attr = { .max_wr = DEPTH,
						  .max_sge = 1 } };
	struct ibv_srq_attr sa = { .srq_limit = 4 };
	struct side a, b;
	struct ibv_srq *srq;
	struct cqe e[DEPTH];
	bool resize;
	int i, rc = -1;

	srq = ibv_create_srq(db->pd, &si);
	if (!srq)
		return bad("ibv_create_srq: %s", strerror(errno));
	if (side_create(&a, da, IBV_QPT_RC, RC_OPS, NULL) ||
	    side_create(&b, db, IBV_QPT_RC, 0, srq) || rc_connect(&a, &b))
		goto out;
	for (i = 0; i < 6; i++) {
		struct ibv_sge sge;
		struct ibv_recv_wr wr = { .wr_id = 1000 + i, .sg_list = &sge,
					  .num_sge = 1 }, *bad_wr;

		sge_at(&b, &sge, RECV0 + i * 1024, 1024);
		if (ibv_post_srq_recv(srq, &wr, &bad_wr)) {
			bad("ibv_post_srq_recv: %s", strerror(errno));
			goto out;
		}
	}
	if (ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT)) {
		bad("ibv_modify_srq: %s", strerror(errno));
		goto out;
	}
	/*
	 * Growing the SRQ with the receives posted: done where the device
	 * says it can (IBV_DEVICE_SRQ_RESIZE: the limit stays armed, and
	 * the event below must still come), refused where it says not
	 * (pvrdma on backend=ibverbs).
	 */
	resize = db->attr.device_cap_flags & IBV_DEVICE_SRQ_RESIZE;
	sa.max_wr = 2 * DEPTH;
	i = ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR);
	if (!is_pvrdma(db)) {
		printf("# %s: SRQ resize %s\n", db->name, i ? "refused" : "done");
		resize = !i;
	} else if (resize ? i != 0 : i != EOPNOTSUPP) {
		bad("SRQ resize: %s, expected %s", i ? strerror(i) : "done",
		    resize ? "done" : "EOPNOTSUPP");
		goto out;
	}
	memset(&sa, 0, sizeof(sa));
	if (ibv_query_srq(srq, &sa) || sa.srq_limit != 4 ||
	    sa.max_wr < (resize ? 2 * DEPTH : DEPTH)) {
		bad("query: limit %u max_wr %u", sa.srq_limit, sa.max_wr);
		goto out;
	}
	/* 6 posted, limit 4: two SENDs leave 4 (no event), a third 3. */
	fill(a.buf + SRC, 4096, 0xa7);
	for (i = 0; i < 2; i++)
		if (wr_send_one(&a, 1100 + i, i * 100, 64))
			goto out_errno;
	if (poll_n(&a, e, 2) || poll_n(&b, e, 2))
		goto out;
	if (ibv_query_srq(srq, &sa) || sa.srq_limit != 4) {
		bad("limit %u after 2 of 6 WQEs were used", sa.srq_limit);
		goto out;
	}
	if (wr_send_one(&a, 1102, 200, 64))
		goto out_errno;
	if (poll_n(&a, e, 1) || poll_n(&b, e, 1))
		goto out;
	if (e[0].wr_id != 1002 ||
	    check_bytes(b.buf + RECV0 + 2048, a.buf + SRC + 200, 64, "SEND"))
		goto out;
	if (wait_event(db, IBV_EVENT_SRQ_LIMIT_REACHED, srq))
		goto out;
	if (ibv_query_srq(srq, &sa) || sa.srq_limit != 0) {
		bad("limit %u after the event, expected 0 (disarmed)",
		    sa.srq_limit);
		goto out;
	}
	rc = 0;
	goto out;
out_errno:
	bad("ibv_wr_complete: %s", strerror(errno));
out:
	side_destroy(&a);
	side_destroy(&b);
	ibv_destroy_srq(srq);
	return rc;
}

static int modify_fails(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
			const char *what)
{
	if (!ibv_modify_qp(qp, a, mask))
		return bad("%s was accepted", what);
	return 0;
}

/*
 * QP transitions with the attribute masks of the IBA's table: refusals
 * for missing required and for not-allowed attributes, a skipped state;
 * INIT -> INIT; RTS -> SQD with the SQ_DRAINED event, SQD -> SQD, SQD ->
 * RTS with data flowing after; any -> ERR, ERR -> RESET.
 */
static int t_transitions(struct dev *da, struct dev *db)
{
	struct side a, b;
	struct ibv_qp_attr q, r;
	struct ibv_qp_init_attr ia;
	int rc = -1;

	if (side_create(&a, da, IBV_QPT_RC, RC_OPS, NULL) ||
	    side_create(&b, db, IBV_QPT_RC, 0, NULL))
		goto out;

	memset(&q, 0, sizeof(q));
	q.qp_state = IBV_QPS_INIT;
	q.port_num = PORT;
	q.qp_access_flags = ALL_ACCESS;
	if (modify_fails(a.qp, &q, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				    IBV_QP_ACCESS_FLAGS,
			 "RESET -> INIT without a port") ||
	    modify_fails(a.qp, &q, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS |
				    IBV_QP_SQ_PSN,
			 "RESET -> INIT with an SQ PSN"))
		goto out;
	rtr_attr(&a, &b, PSN_B, &r);
	if (modify_fails(a.qp, &r, RTR_MASK, "RESET -> RTR"))
		goto out;
	if (to_init(&a) || to_init(&b)) {
		bad("RESET -> INIT: %s", strerror(errno));
		goto out;
	}
	q.qp_state = IBV_QPS_INIT;
	q.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(a.qp, &q, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS) ||
	    ibv_query_qp(a.qp, &q, IBV_QP_ACCESS_FLAGS | IBV_QP_STATE, &ia) ||
	    q.qp_access_flags != IBV_ACCESS_REMOTE_WRITE ||
	    q.qp_state != IBV_QPS_INIT) {
		bad("INIT -> INIT: access %#x state %d", q.qp_access_flags,
		    q.qp_state);
		goto out;
	}
	q.qp_access_flags = ALL_ACCESS;
	if (ibv_modify_qp(a.qp, &q, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS)) {
		bad("INIT -> INIT: %s", strerror(errno));
		goto out;
	}
	if (modify_fails(a.qp, &r, RTR_MASK & ~IBV_QP_AV,
			 "INIT -> RTR without an address vector") ||
	    modify_fails(a.qp, &r, RTR_MASK & ~IBV_QP_DEST_QPN,
			 "INIT -> RTR without a destination QPN") ||
	    modify_fails(a.qp, &r, RTR_MASK | IBV_QP_SQ_PSN,
			 "INIT -> RTR with an SQ PSN"))
		goto out;
	if (ibv_modify_qp(a.qp, &r, RTR_MASK)) {
		bad("INIT -> RTR: %s", strerror(errno));
		goto out;
	}
	rts_attr(PSN_A, &q);
	if (modify_fails(a.qp, &q, RTS_MASK & ~IBV_QP_SQ_PSN,
			 "RTR -> RTS without an SQ PSN") ||
	    modify_fails(a.qp, &q, RTS_MASK | IBV_QP_DEST_QPN,
			 "RTR -> RTS with a destination QPN"))
		goto out;
	if (ibv_modify_qp(a.qp, &q, RTS_MASK)) {
		bad("RTR -> RTS: %s", strerror(errno));
		goto out;
	}
	rtr_attr(&b, &a, PSN_A, &r);
	if (ibv_modify_qp(b.qp, &r, RTR_MASK)) {
		bad("B: INIT -> RTR: %s", strerror(errno));
		goto out;
	}
	rts_attr(PSN_B, &q);
	if (ibv_modify_qp(b.qp, &q, RTS_MASK)) {
		bad("B: RTR -> RTS: %s", strerror(errno));
		goto out;
	}

	/* RTS -> SQD, told when drained; SQD -> SQD changes the timeout. */
	memset(&q, 0, sizeof(q));
	q.qp_state = IBV_QPS_SQD;
	q.en_sqd_async_notify = 1;
	if (ibv_modify_qp(a.qp, &q, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY)) {
		bad("RTS -> SQD: %s", strerror(errno));
		goto out;
	}
	if (wait_event(da, IBV_EVENT_SQ_DRAINED, a.qp))
		goto out;
	if (ibv_query_qp(a.qp, &q, IBV_QP_STATE, &ia) ||
	    q.qp_state != IBV_QPS_SQD) {
		bad("state %d after RTS -> SQD", q.qp_state);
		goto out;
	}
	memset(&q, 0, sizeof(q));
	q.qp_state = IBV_QPS_SQD;
	q.timeout = 16;
	if (ibv_modify_qp(a.qp, &q, IBV_QP_STATE | IBV_QP_TIMEOUT) ||
	    ibv_query_qp(a.qp, &q, IBV_QP_TIMEOUT, &ia) || q.timeout != 16) {
		bad("SQD -> SQD with a new timeout: %s / %u", strerror(errno),
		    q.timeout);
		goto out;
	}
	q.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(a.qp, &q, IBV_QP_STATE)) {
		bad("SQD -> RTS: %s", strerror(errno));
		goto out;
	}
	fill(a.buf + SRC, 4096, 0xb8);
	if (post_recv(&b, 500, RECV0, 1024) || wr_send_one(&a, 1200, 300, 99)) {
		bad("post: %s", strerror(errno));
		goto out;
	}
	if (expect_only_send(&a, &b, 1200, 300, 99))
		goto out;

	/* Any state -> ERR, ERR -> RESET, and RESET -> INIT again. */
	q.qp_state = IBV_QPS_ERR;
	if (ibv_modify_qp(a.qp, &q, IBV_QP_STATE)) {
		bad("RTS -> ERR: %s", strerror(errno));
		goto out;
	}
	q.qp_state = IBV_QPS_RTS;
	if (modify_fails(a.qp, &q, IBV_QP_STATE, "ERR -> RTS"))
		goto out;
	q.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(a.qp, &q, IBV_QP_STATE) ||
	    ibv_query_qp(a.qp, &q, IBV_QP_STATE, &ia) ||
	    q.qp_state != IBV_QPS_RESET || to_init(&a)) {
		bad("ERR -> RESET -> INIT: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	side_destroy(&a);
	side_destroy(&b);
	return rc;
}

/* Extended CQs: what may be asked, what is refused. */
static int t_cq_ex(struct dev *d)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 8,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
	};
	struct ibv_poll_cq_attr pa = {};
	struct ibv_cq_ex *cq;

	cq = ibv_create_cq_ex(d->ctx, &ca);
	if (!cq)
		return bad("all standard fields, single threaded: %s",
			   strerror(errno));
	if (ibv_start_poll(cq, &pa) != ENOENT)
		return bad("a new CQ polled something");
	if (ibv_destroy_cq(ibv_cq_ex_to_cq(cq)))
		return bad("ibv_destroy_cq: %s", strerror(errno));

	/* Wall-clock timestamps alone (t_cq_ts checks their values). */
	ca.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	cq = ibv_create_cq_ex(d->ctx, &ca);
	if (!cq && is_pvrdma(d))
		return bad("wall-clock timestamps: %s", strerror(errno));
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	return 0;
}

/* The device's raw clock (ibv_query_rt_values_ex). */
static int raw_clock(struct dev *d, uint64_t *ns)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	int err = ibv_query_rt_values_ex(d->ctx, &v);

	if (err || !(v.comp_mask & IBV_VALUES_MASK_RAW_CLOCK))
		return bad("ibv_query_rt_values_ex: %s",
			   err ? strerror(err) : "no raw clock");
	*ns = v.raw_clock.tv_nsec;
	return 0;
}

/*
 * Completion timestamps (a project extension on this device): the clock's
 * width and rate in ibv_query_device_ex, a stamp in every completion of a
 * CQ that asked, later ones not earlier, and 20 ms of sleep between two
 * SENDs at least 10 ms of the device's clock apart. On pvrdma also: each
 * stamp lies between the raw clock (ibv_query_rt_values_ex) read before
 * the post and after the poll, and its wall-clock reading between the
 * CLOCK_REALTIME readings around them, give or take the provider's error:
 * no more than the time ibv_create_cq_ex took (its calibration is in
 * there), the post-to-poll time (where it may calibrate again), and 0.1%
 * of the time since the CQ was made (the two clocks' rates).
 */
static int t_cq_ts(struct dev *da, struct dev *db)
{
	struct ibv_device_attr_ex ax = {};
	uint64_t ts[3], mask, gap_ns, r0[3], r1[3], wall[3];
	int64_t c0, cal_ns, w0[3], w1[3], err;
	bool wc = is_pvrdma(da);
	struct side a, b;
	struct cqe e;
	int i, rc = -1;

	if (ibv_query_device_ex(da->ctx, NULL, &ax))
		return bad("ibv_query_device_ex: %s", strerror(errno));
	extra_wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			 (wc ? IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK : 0);
	c0 = real_ns();
	i = side_create(&a, da, IBV_QPT_RC, RC_OPS, NULL);
	cal_ns = cq_create_ns;
	extra_wc_flags = 0;
	if (i && !is_pvrdma(da)) {
		printf("# %s: completion timestamps refused\n", da->name);
		side_destroy(&a);
		return 0;
	}
	if (i || side_create(&b, db, IBV_QPT_RC, 0, NULL) ||
	    rc_connect(&a, &b))
		goto out;
	mask = ax.completion_timestamp_mask;
	if (is_pvrdma(da) && (mask != (1ull << 48) - 1 ||
			      ax.hca_core_clock != 1000000)) {
		bad("timestamp mask %#" PRIx64 ", clock %" PRIu64 " kHz, "
		    "expected 48 bits at 1000000 kHz", mask, ax.hca_core_clock);
		goto out;
	}
	if (!mask || !ax.hca_core_clock) {
		bad("timestamp mask %#" PRIx64 ", clock %" PRIu64 " kHz", mask,
		    ax.hca_core_clock);
		goto out;
	}
	fill(a.buf + SRC, 256, 0x61);
	for (i = 0; i < 3; i++) {
		struct ibv_poll_cq_attr pa = {};
		uint64_t end = now_ms() + timeout_s * 1000;
		int ret;

		if (i == 2)
			usleep(20000);
		if (wc && raw_clock(da, &r0[i]))
			goto out;
		w0[i] = real_ns();
		if (post_recv(&b, 1500 + i, RECV0, 1024) ||
		    wr_send_one(&a, 1510 + i, 0, 64))
			goto out;
		while ((ret = ibv_start_poll(a.cq, &pa)) == ENOENT &&
		       now_ms() < end)
			;
		if (ret) {
			bad("no completion of SEND %d", i);
			goto out;
		}
		read_cqe(a.cq, &e);
		ts[i] = ibv_wc_read_completion_ts(a.cq);
		if (wc)
			wall[i] = ibv_wc_read_completion_wallclock_ns(a.cq);
		ibv_end_poll(a.cq);
		w1[i] = real_ns();
		if (wc && raw_clock(da, &r1[i]))
			goto out;
		if (check_cqe(&e, 1510 + i, IBV_WC_SEND, a.qp->qp_num) ||
		    poll_n(&b, &e, 1))
			goto out;
	}
	/* Differences modulo the clock's width. */
	if (!ts[0] || ((ts[1] - ts[0]) & mask) > mask / 2) {
		bad("timestamps %#" PRIx64 " then %#" PRIx64, ts[0], ts[1]);
		goto out;
	}
	gap_ns = ((ts[2] - ts[1]) & mask) * 1000000 / ax.hca_core_clock;
	if (gap_ns < 10000000 || gap_ns > 600000000000ull) {
		bad("20 ms apart, the stamps differ by %" PRIu64 " ns", gap_ns);
		goto out;
	}
	for (i = 0; wc && i < 3; i++) {
		if (((ts[i] - r0[i]) & mask) > ((r1[i] - r0[i]) & mask)) {
			bad("SEND %d: stamp %#" PRIx64 " outside the raw clock's "
			    "%#" PRIx64 "..%#" PRIx64, i, ts[i], r0[i], r1[i]);
			goto out;
		}
		err = cal_ns + (w1[i] - w0[i]) + (w1[i] - c0) / 1000;
		if ((int64_t)wall[i] < w0[i] - err ||
		    (int64_t)wall[i] > w1[i] + err) {
			bad("SEND %d: wall clock %" PRId64 " ns from the post, "
			    "which was %" PRId64 " ns before the poll; error "
			    "allowed %" PRId64 " ns", i,
			    (int64_t)wall[i] - w0[i], w1[i] - w0[i], err);
			goto out;
		}
		printf("# %s: SEND %d stamped %" PRId64 " ns after the post, "
		       "polled %" PRId64 " ns after it; error allowed %" PRId64
		       " ns\n", da->name, i, (int64_t)wall[i] - w0[i],
		       w1[i] - w0[i], err);
	}
	rc = 0;
out:
	side_destroy(&a);
	side_destroy(&b);
	return rc;
}

/* Send ops the QP type has not: refused at creation. */
static int t_qp_ex_refused(struct dev *d)
{
	struct ibv_cq *cq = ibv_create_cq(d->ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = d->pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE,
	};
	struct ibv_qp *qp;
	int rc = 0;

	if (!cq)
		return bad("ibv_create_cq: %s", strerror(errno));
	qp = ibv_create_qp_ex(d->ctx, &qa);
	if (qp) {
		rc = bad("a UD QP with RDMA WRITE was made");
		ibv_destroy_qp(qp);
	}
	ibv_destroy_cq(cq);
	return rc;
}

int main(int argc, char **argv)
{
	const char *dev_a = NULL, *dev_b = NULL;
	struct dev da = {}, db = {};
	struct side a, b;
	int gid = -1, opt;

	while ((opt = getopt(argc, argv, "d:D:g:t:")) != -1) {
		switch (opt) {
		case 'd':
			dev_a = optarg;
			break;
		case 'D':
			dev_b = optarg;
			break;
		case 'g':
			gid = atoi(optarg);
			break;
		case 't':
			timeout_s = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: verbs_ex -d DEV [-D PEER_DEV] "
					"[-g GID_INDEX] [-t TIMEOUT_S]\n");
			return 2;
		}
	}
	if (!dev_a || timeout_s < 1)
		return 2;
	if (dev_open(&da, dev_a, gid) ||
	    dev_open(&db, dev_b ? dev_b : dev_a, gid))
		return 1;
	printf("# %s -> %s, GID index %d\n", da.name, db.name, da.gid_index);

	report("cq_ex: create, empty poll, refusals", t_cq_ex(&da));
	report("qp_ex: send ops the QP type has not are refused",
	       t_qp_ex_refused(&da));
	report("cq_ex: completion timestamps, raw and wall clock",
	       t_cq_ts(&da, &db));

	if (side_create(&a, &da, IBV_QPT_RC,
			RC_OPS | IBV_QP_EX_WITH_SEND_WITH_INV |
				IBV_QP_EX_WITH_LOCAL_INV, NULL) ||
	    side_create(&b, &db, IBV_QPT_RC, 0, NULL) || rc_connect(&a, &b)) {
		report("rc: set up an extended QP pair", -1);
	} else {
		report("rc: every opcode in one ibv_wr batch", t_rc_batch(&a, &b));
		report("rc: ibv_wr_abort posts nothing", t_abort(&a, &b));
		report("rc: a batch with a bad WR is refused whole",
		       t_bad_batch(&a, &b));
		report("rc: ibv_post_send and ibv_poll_cq on extended objects",
		       t_classic_on_ex(&a, &b));
		report("rc: ibv_query_qp returns what was set",
		       t_query_rc(&a, &b));
		report("mr: ibv_rereg_mr (access, translation, PD)",
		       t_rereg(&a, &b));
		report("cq: ibv_resize_cq keeps what is pending, refuses less",
		       t_resize_cq(&a, &b));
	}
	side_destroy(&a);
	side_destroy(&b);

	if (side_create(&a, &da, IBV_QPT_UD,
			IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
			NULL) ||
	    side_create(&b, &db, IBV_QPT_UD, 0, NULL) || ud_ready(&a, &b) ||
	    ud_ready(&b, &a))
		report("ud: set up an extended QP pair", -1);
	else
		report("ud: ibv_wr batch with addresses, inline, Q_Keys",
		       t_ud(&a, &b));
	side_destroy(&a);
	side_destroy(&b);

	report("uc: send and write arrive, drops go unnoticed",
	       t_uc(&da, &db));
	report("mw: type 1 and 2 windows: bind, access, invalidation",
	       t_mw(&da, &db));
	report("mw: LOCAL_WRITE in a bind is ignored, no REMOTE_WRITE refuses",
	       t_mw_local_write(&da, &db));
	report("qp: create flags none, access bits beyond the device's",
	       t_qp_extras(&da, &db));
	report("srq: limit set, read back, resized, event, disarmed",
	       t_srq_limit(&da, &db));
	report("qp: transitions and their attribute masks",
	       t_transitions(&da, &db));
	report("pd: parent and thread domains, allocators",
	       t_parent_domain(&da, &db));
	report("rc: ATOMIC_WRITE lands whole, in order, aligned only",
	       t_atomic_write(&da, &db));
	report("ud: multicast to attached QPs only, bytes checked",
	       t_mcast(&da, &db));
	report("xrc: one domain in two contexts, two SRQs, SEND/IMM/WRITE",
	       t_xrc(&da, &db));

	printf("RESULT passed=%d failed=%d\n", passed, failed);
	return failed ? 1 : 0;
}
