/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Known RC traffic between a QP on DEV (the requester) and one on PEER
 * (the responder), and the port counters of both devices read from sysfs
 * (/sys/class/infiniband/DEV/ports/1/hw_counters) before and after each
 * step: every counter must move by exactly what the step sends, and no
 * other. The data moved is verified too.
 *
 *   hw_counters -d DEV -D PEER [-n COUNT] [-s SIZE]
 *
 * Path MTU 1024, so a message of SIZE bytes is ceil(SIZE / 1024) packets.
 * Steps: COUNT SENDs, WRITEs, READs of SIZE bytes and COUNT fetch-and-adds;
 * a SEND that meets no receive WQE and is retried until one is posted; a
 * SEND whose RNR retries run out; a SEND to a QP number nobody has; a READ
 * with a bad rkey. Nothing else may use the two devices meanwhile.
 * Prints "PASS step" or "FAIL step: why"; exits non-zero on a failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define PORT 1
#define MTU 1024
#define TIMEOUT_S 20

/* The port counters, as our driver names them. */
enum {
	SENT_PKTS, RCVD_PKTS, SENT_BYTES, RCVD_BYTES, RDMA_SENDS, RDMA_RECVS,
	RDMA_WRITES, RDMA_WRITES_RCVD, RDMA_READS, RDMA_READS_RCVD, ATOMICS,
	ATOMICS_RCVD, RETRIES, RCVD_RNR, SEND_RNR, RETRY_EXC, RNR_RETRY_EXC,
	COMPLETION_ERRORS, LINK_DOWNED, LINKS_UP, NCTR
};

static const char *const ctr_name[NCTR] = {
	"sent_pkts", "rcvd_pkts", "sent_bytes", "rcvd_bytes", "rdma_sends",
	"rdma_recvs", "rdma_writes", "rdma_writes_rcvd", "rdma_reads",
	"rdma_reads_rcvd", "atomics", "atomics_rcvd", "retries",
	"rcvd_rnr_err", "send_rnr_err", "retry_exceeded_err",
	"retry_rnr_exceeded_err", "completion_errors", "link_downed",
	"links_up",
};

struct dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	int gid_index;
	union ibv_gid gid;
	uint64_t ctr[NCTR];
};

static int failures;

static void fail(const char *step, const char *fmt, ...)
{
	va_list ap;

	printf("FAIL %s: ", step);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	failures++;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL setup: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

static uint64_t ctr_read1(struct dev *d, int i)
{
	char path[256];
	unsigned long long v;
	FILE *f;

	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/%d/hw_counters/%s", d->name,
		 PORT, ctr_name[i]);
	f = fopen(path, "r");
	if (!f)
		die("cannot open %s: %s", path, strerror(errno));
	if (fscanf(f, "%llu", &v) != 1)
		die("cannot read %s", path);
	fclose(f);
	return v;
}

/*
 * The counters of @d moved by exactly @want since the last check (the
 * link counters excepted: they are the host's); remember them.
 */
static void ctr_expect(struct dev *d, const char *step, const int64_t *want)
{
	uint64_t now[NCTR];
	int i;

	/* The IB core keeps values 10 ms: read after they are stale. */
	usleep(20000);
	for (i = 0; i < NCTR; i++)
		now[i] = ctr_read1(d, i);
	for (i = 0; i < LINK_DOWNED; i++) {
		if ((int64_t)(now[i] - d->ctr[i]) != want[i])
			fail(step, "%s %s moved by %" PRId64 ", not %" PRId64,
			     d->name, ctr_name[i], (int64_t)(now[i] - d->ctr[i]),
			     want[i]);
	}
	memcpy(d->ctr, now, sizeof(now));
}

static void dev_open(struct dev *d, const char *name, size_t len)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	int n, i;

	d->name = name;
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx)
		die("cannot open %s", name);
	if (ibv_query_port(d->ctx, PORT, &pa))
		die("%s: query_port", name);
	/* A RoCE v2 IPv4-mapped GID if there is one, else index 0. */
	d->gid_index = 0;
	for (i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;

		if (!ibv_query_gid_ex(d->ctx, PORT, i, &e, 0) &&
		    e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    e.gid.raw[10] == 0xff && e.gid.raw[11] == 0xff) {
			d->gid_index = i;
			break;
		}
	}
	if (ibv_query_gid(d->ctx, PORT, d->gid_index, &d->gid))
		die("%s: query_gid", name);
	d->pd = ibv_alloc_pd(d->ctx);
	d->cq = ibv_create_cq(d->ctx, 256, NULL, NULL, 0);
	d->len = len;
	d->buf = calloc(1, len);
	if (!d->pd || !d->cq || !d->buf)
		die("%s: pd/cq/buffer", name);
	d->mr = ibv_reg_mr(d->pd, d->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!d->mr)
		die("%s: reg_mr: %s", name, strerror(errno));
}

static struct ibv_qp *qp_new(struct dev *d)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = d->cq, .recv_cq = d->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = PORT,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);

	if (!qp || ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				 IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("%s: create QP", d->name);
	return qp;
}

/* @qp on @d to RTS towards @dqpn on @peer. */
static void qp_connect(struct ibv_qp *qp, struct dev *d, uint32_t dqpn,
		       struct dev *peer, uint8_t rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = dqpn, .rq_psn = 0, .max_dest_rd_atomic = 4,
		.min_rnr_timer = 31,    /* 491 ms: a retry waits for us */
		.ah_attr = { .is_global = 1, .port_num = PORT,
			     .grh = { .dgid = peer->gid, .hop_limit = 64,
				      .sgid_index = d->gid_index } },
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("%s: RTR", d->name);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 1;
	a.rnr_retry = rnr_retry;
	a.sq_psn = 0;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		die("%s: RTS", d->name);
}

/* A fresh connected pair; the requester has @rnr_retry. */
static void pair_new(struct ibv_qp **qa, struct dev *a, struct ibv_qp **qb,
		     struct dev *b, uint8_t rnr_retry)
{
	if (*qa && ibv_destroy_qp(*qa))
		die("%s: destroy QP", a->name);
	if (*qb && ibv_destroy_qp(*qb))
		die("%s: destroy QP", b->name);
	*qa = qp_new(a);
	*qb = qp_new(b);
	qp_connect(*qa, a, (*qb)->qp_num, b, rnr_retry);
	qp_connect(*qb, b, (*qa)->qp_num, a, 7);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The next completion on @d's CQ (a generous timeout: never hangs). */
static int poll1(struct dev *d, struct ibv_wc *wc)
{
	double end = now_s() + TIMEOUT_S;

	while (now_s() < end) {
		int n = ibv_poll_cq(d->cq, 1, wc);

		if (n < 0)
			die("%s: poll_cq", d->name);
		if (n)
			return 0;
	}
	return -1;
}

static int expect_wc(struct dev *d, const char *step, uint64_t wr_id,
		     enum ibv_wc_status status)
{
	struct ibv_wc wc;

	if (poll1(d, &wc)) {
		fail(step, "%s: no completion for %" PRIu64 " in %d s",
		     d->name, wr_id, TIMEOUT_S);
		return -1;
	}
	if (wc.wr_id != wr_id || wc.status != status) {
		fail(step, "%s: completion %" PRIu64 " %s, expected %" PRIu64
		     " %s", d->name, wc.wr_id, ibv_wc_status_str(wc.status),
		     wr_id, ibv_wc_status_str(status));
		return -1;
	}
	return 0;
}

static void post_recv(struct ibv_qp *qp, struct dev *d, uint64_t id,
		      size_t off, uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)d->buf + off, len, d->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("%s: post_recv", d->name);
}

static void post_send(struct ibv_qp *qp, struct dev *d, uint64_t id,
		      enum ibv_wr_opcode op, size_t off, uint32_t len,
		      struct dev *peer, size_t roff, uint32_t rkey)
{
	struct ibv_sge s = { (uintptr_t)d->buf + off, len, d->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)peer->buf + roff;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)peer->buf + roff;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(qp, &wr, &bad))
		die("%s: post_send", d->name);
}

static void pattern(uint8_t *p, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + 1);
}

static int check_pattern(const char *step, const uint8_t *p, size_t len,
			 unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (p[i] != (uint8_t)(i * 31 + seed * 7 + 1)) {
			fail(step, "byte %zu is %u, expected %u", i, p[i],
			     (uint8_t)(i * 31 + seed * 7 + 1));
			return -1;
		}
	}
	return 0;
}

static void pass(const char *step, int before)
{
	if (failures == before)
		printf("PASS %s\n", step);
}

int main(int argc, char **argv)
{
	const char *dn = NULL, *pn = NULL;
	unsigned n = 50, size = 4000, i, k;
	int64_t wa[NCTR], wb[NCTR];
	struct dev a = { 0 }, b = { 0 };
	struct ibv_qp *qa = NULL, *qb = NULL;
	uint64_t pk, v;
	int opt, f;

	while ((opt = getopt(argc, argv, "d:D:n:s:")) != -1) {
		switch (opt) {
		case 'd':
			dn = optarg;
			break;
		case 'D':
			pn = optarg;
			break;
		case 'n':
			n = atoi(optarg);
			break;
		case 's':
			size = atoi(optarg);
			break;
		default:
			dn = NULL;
		}
	}
	if (!dn || !pn || !n || n > 32 || !size || size > 65536) {
		fprintf(stderr, "usage: %s -d DEV -D PEER [-n 1..32] "
			"[-s 1..65536]\n", argv[0]);
		return 2;
	}
	pk = (size + MTU - 1) / MTU;
	dev_open(&a, dn, 2 * 65536 + 4096);
	dev_open(&b, pn, 2 * 65536 + 4096);
	pair_new(&qa, &a, &qb, &b, 7);
	for (i = 0; i < NCTR; i++) {
		a.ctr[i] = ctr_read1(&a, i);
		b.ctr[i] = ctr_read1(&b, i);
	}

	/* COUNT SENDs */
	f = failures;
	for (i = 0; i < n; i++) {
		memset(b.buf, 0, size);
		pattern(a.buf, size, i);
		post_recv(qb, &b, 100 + i, 0, size);
		post_send(qa, &a, 100 + i, IBV_WR_SEND, 0, size, &b, 0, 0);
		if (expect_wc(&a, "send", 100 + i, IBV_WC_SUCCESS) ||
		    expect_wc(&b, "send", 100 + i, IBV_WC_SUCCESS) ||
		    check_pattern("send", b.buf, size, i))
			break;
	}
	memset(wa, 0, sizeof(wa));
	memset(wb, 0, sizeof(wb));
	wa[SENT_PKTS] = n * pk;
	wa[SENT_BYTES] = (int64_t)n * size;
	wa[RDMA_SENDS] = n;
	wb[RCVD_PKTS] = n * pk;
	wb[RCVD_BYTES] = (int64_t)n * size;
	wb[RDMA_RECVS] = n;
	ctr_expect(&a, "send", wa);
	ctr_expect(&b, "send", wb);
	pass("send", f);

	/* COUNT WRITEs, then COUNT READs of what was written */
	f = failures;
	for (i = 0; i < n; i++) {
		pattern(a.buf, size, 50 + i);
		post_send(qa, &a, 200 + i, IBV_WR_RDMA_WRITE, 0, size, &b, 0,
			  b.mr->rkey);
		if (expect_wc(&a, "write", 200 + i, IBV_WC_SUCCESS) ||
		    check_pattern("write", b.buf, size, 50 + i))
			break;
		memset(a.buf + 65536, 0, size);
		post_send(qa, &a, 300 + i, IBV_WR_RDMA_READ, 65536, size, &b,
			  0, b.mr->rkey);
		if (expect_wc(&a, "read", 300 + i, IBV_WC_SUCCESS) ||
		    check_pattern("read", a.buf + 65536, size, 50 + i))
			break;
	}
	memset(wa, 0, sizeof(wa));
	memset(wb, 0, sizeof(wb));
	wa[SENT_PKTS] = n * pk + n;
	wa[SENT_BYTES] = (int64_t)n * size;
	wa[RDMA_WRITES] = n;
	wa[RDMA_READS] = n;
	wa[RCVD_PKTS] = n * pk;
	wa[RCVD_BYTES] = (int64_t)n * size;
	wb[RCVD_PKTS] = n * pk + n;
	wb[RCVD_BYTES] = (int64_t)n * size;
	wb[RDMA_WRITES_RCVD] = n;
	wb[RDMA_READS_RCVD] = n;
	wb[SENT_PKTS] = n * pk;
	wb[SENT_BYTES] = (int64_t)n * size;
	ctr_expect(&a, "write+read", wa);
	ctr_expect(&b, "write+read", wb);
	pass("write+read", f);

	/* COUNT fetch-and-adds of 1 on one word */
	f = failures;
	memset(b.buf + 4096, 0, 8);
	for (i = 0; i < n; i++) {
		post_send(qa, &a, 400 + i, IBV_WR_ATOMIC_FETCH_AND_ADD, 8192, 8,
			  &b, 4096, b.mr->rkey);
		if (expect_wc(&a, "atomic", 400 + i, IBV_WC_SUCCESS))
			break;
		memcpy(&v, a.buf + 8192, 8);
		if (v != i)
			fail("atomic", "fetch-and-add %u returned %" PRIu64, i,
			     v);
	}
	memcpy(&v, b.buf + 4096, 8);
	if (v != n)
		fail("atomic", "the word is %" PRIu64 ", not %u", v, n);
	memset(wa, 0, sizeof(wa));
	memset(wb, 0, sizeof(wb));
	wa[SENT_PKTS] = n;
	wa[RCVD_PKTS] = n;
	wa[ATOMICS] = n;
	wb[RCVD_PKTS] = n;
	wb[SENT_PKTS] = n;
	wb[ATOMICS_RCVD] = n;
	ctr_expect(&a, "atomic", wa);
	ctr_expect(&b, "atomic", wb);
	pass("atomic", f);

	/*
	 * A SEND with no receive WQE: NAKed (the responder's RNR timer is
	 * 491 ms) until one is posted. How many times it went is not ours to
	 * know, only that each try but the last was NAKed.
	 */
	f = failures;
	pattern(a.buf, size, 99);
	post_send(qa, &a, 500, IBV_WR_SEND, 0, size, &b, 0, 0);
	for (k = 0; k < 100 * TIMEOUT_S &&
	     ctr_read1(&a, RCVD_RNR) == a.ctr[RCVD_RNR]; k++)
		usleep(10000);
	post_recv(qb, &b, 500, 0, size);
	if (!expect_wc(&a, "rnr", 500, IBV_WC_SUCCESS) &&
	    !expect_wc(&b, "rnr", 500, IBV_WC_SUCCESS))
		check_pattern("rnr", b.buf, size, 99);
	usleep(20000);
	k = ctr_read1(&a, RETRIES) - a.ctr[RETRIES];
	if (k < 1)
		fail("rnr", "%s retries moved by %u", a.name, k);
	memset(wa, 0, sizeof(wa));
	memset(wb, 0, sizeof(wb));
	wa[SENT_PKTS] = (k + 1) * pk;
	wa[SENT_BYTES] = (int64_t)(k + 1) * size;
	wa[RDMA_SENDS] = 1;
	wa[RETRIES] = k;
	wa[RCVD_RNR] = k;
	wb[RCVD_PKTS] = (k + 1) * pk;
	wb[RCVD_BYTES] = (int64_t)(k + 1) * size;
	wb[RDMA_RECVS] = 1;
	wb[SEND_RNR] = k;
	ctr_expect(&a, "rnr", wa);
	ctr_expect(&b, "rnr", wb);
	pass("rnr", f);
	printf("(the SEND went %u times)\n", k + 1);

	/* rnr_retry 0: the first RNR NAK ends it */
	f = failures;
	pair_new(&qa, &a, &qb, &b, 0);
	post_send(qa, &a, 600, IBV_WR_SEND, 0, size, &b, 0, 0);
	expect_wc(&a, "rnr-exhausted", 600, IBV_WC_RNR_RETRY_EXC_ERR);
	memset(wa, 0, sizeof(wa));
	memset(wb, 0, sizeof(wb));
	wa[SENT_PKTS] = pk;
	wa[SENT_BYTES] = size;
	wa[RDMA_SENDS] = 1;
	wa[RCVD_RNR] = 1;
	wa[RNR_RETRY_EXC] = 1;
	wa[COMPLETION_ERRORS] = 1;
	wb[RCVD_PKTS] = pk;
	wb[RCVD_BYTES] = size;
	wb[SEND_RNR] = 1;
	ctr_expect(&a, "rnr-exhausted", wa);
	ctr_expect(&b, "rnr-exhausted", wb);
	pass("rnr-exhausted", f);

	/* a QP number nobody has: RETRY_EXC_ERR, nothing arrives */
	f = failures;
	if (ibv_destroy_qp(qa))
		die("%s: destroy QP", a.name);
	qa = qp_new(&a);
	qp_connect(qa, &a, qb->qp_num + 100, &b, 7);
	post_send(qa, &a, 700, IBV_WR_SEND, 0, size, &b, 0, 0);
	expect_wc(&a, "retry-exhausted", 700, IBV_WC_RETRY_EXC_ERR);
	memset(wa, 0, sizeof(wa));
	memset(wb, 0, sizeof(wb));
	wa[SENT_PKTS] = pk;
	wa[SENT_BYTES] = size;
	wa[RDMA_SENDS] = 1;
	wa[RETRY_EXC] = 1;
	wa[COMPLETION_ERRORS] = 1;
	ctr_expect(&a, "retry-exhausted", wa);
	ctr_expect(&b, "retry-exhausted", wb);
	pass("retry-exhausted", f);

	/* a READ with a bad rkey: REM_ACCESS_ERR, then a flushed WQE */
	f = failures;
	pair_new(&qa, &a, &qb, &b, 7);
	post_send(qa, &a, 800, IBV_WR_RDMA_READ, 0, 64, &b, 0,
		  b.mr->rkey ^ 0x100);
	expect_wc(&a, "bad-rkey", 800, IBV_WC_REM_ACCESS_ERR);
	post_send(qa, &a, 801, IBV_WR_SEND, 0, 64, &b, 0, 0);
	expect_wc(&a, "bad-rkey", 801, IBV_WC_WR_FLUSH_ERR);
	memset(wa, 0, sizeof(wa));
	memset(wb, 0, sizeof(wb));
	wa[SENT_PKTS] = 1;
	wa[RDMA_READS] = 1;
	wa[COMPLETION_ERRORS] = 1;
	wb[RCVD_PKTS] = 1;
	ctr_expect(&a, "bad-rkey", wa);
	ctr_expect(&b, "bad-rkey", wb);
	pass("bad-rkey", f);

	printf("%s links_up %" PRIu64 " link_downed %" PRIu64 "\n", a.name,
	       a.ctr[LINKS_UP], a.ctr[LINK_DOWNED]);
	printf("RESULT %s\n", failures ? "failed" : "passed");
	return failures ? 1 : 0;
}
