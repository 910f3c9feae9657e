// SPDX-License-Identifier: GPL-2.0-only
/*
 * Hostile datagrams at QP1 from user space: a UD QP whose Q_Key is the
 * GSI one (0x80010000) sends N datagrams of random length (0..256) and
 * random bytes, some with the first bytes of a plausible MAD header, to
 * QP 1 of its own port (GID index GID_INDEX), plus N to QP 1 with a wrong
 * Q_Key. Every send must complete successfully (a datagram is gone once
 * sent); what the kernel's MAD layer does with them is the test's to check
 * afterwards (RDMA CM still works, no kernel error).
 *
 *   mad_garbage DEV GID_INDEX N SEED
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#define QP1_QKEY	0x80010000u
#define MAX_LEN		256

static int die(const char *what)
{
	fprintf(stderr, "mad_garbage: %s: %s\n", what, strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_qp_init_attr init = { .qp_type = IBV_QPT_UD };
	struct ibv_qp_attr a = {};
	struct ibv_ah_attr ah_attr = {};
	struct ibv_sge sge;
	struct ibv_send_wr wr = {}, *bad;
	struct ibv_wc wc;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	unsigned char *buf;
	int gid_index, n, i, done, polls;

	if (argc != 5)
		return fprintf(stderr, "usage: %s DEV GID_INDEX N SEED\n",
			       argv[0]), 2;
	gid_index = atoi(argv[2]);
	n = atoi(argv[3]);
	srandom(atoi(argv[4]));
	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("open device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	buf = calloc(1, MAX_LEN);
	if (!pd || !cq || !buf)
		die("pd/cq/buffer");
	mr = ibv_reg_mr(pd, buf, MAX_LEN, 0);
	init.send_cq = cq;
	init.recv_cq = cq;
	init.cap.max_send_wr = 16;
	init.cap.max_recv_wr = 1;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	qp = mr ? ibv_create_qp(pd, &init) : NULL;
	if (!qp)
		die("mr/qp");
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QP1_QKEY;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		die("INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("RTS");
	ah_attr.is_global = 1;
	ah_attr.port_num = 1;
	ah_attr.grh.sgid_index = gid_index;
	ah_attr.grh.hop_limit = 64;
	if (ibv_query_gid(ctx, 1, gid_index, &ah_attr.grh.dgid))
		die("query_gid");
	ah = ibv_create_ah(pd, &ah_attr);
	if (!ah)
		die("create_ah");

	for (i = 0, done = 0; i < 2 * n; i++) {
		int j, len = random() % (MAX_LEN + 1);

		for (j = 0; j < len; j++)
			buf[j] = random();
		if (len >= 4 && i % 3 == 0) {
			buf[0] = 1;		/* base version */
			buf[1] = 7;		/* CM class */
			buf[2] = 2;		/* class version */
		}
		sge.addr = (uintptr_t)buf;
		sge.length = len;
		sge.lkey = mr->lkey;
		wr.wr_id = i;
		wr.sg_list = &sge;
		wr.num_sge = len ? 1 : 0;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = 1;
		/* The second half: a Q_Key QP1 does not have. */
		wr.wr.ud.remote_qkey = i < n ? QP1_QKEY : 0x1234;
		if (ibv_post_send(qp, &wr, &bad))
			die("post_send");
		for (polls = 0; ; polls++) {
			int got = ibv_poll_cq(cq, 1, &wc);

			if (got < 0)
				die("poll_cq");
			if (got)
				break;
			if (polls > 100000000)
				return fprintf(stderr, "mad_garbage: send %d "
					       "never completed\n", i), 1;
		}
		if (wc.status != IBV_WC_SUCCESS)
			return fprintf(stderr, "mad_garbage: send %d: %s\n", i,
				       ibv_wc_status_str(wc.status)), 1;
		done++;
	}
	printf("mad_garbage: %d datagrams to QP1 (%d with its Q_Key) sent\n",
	       done, n);
	ibv_destroy_ah(ah);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
