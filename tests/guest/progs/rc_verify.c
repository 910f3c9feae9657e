/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * End-to-end check of RC queue pairs through plain libibverbs: every
 * user-visible RC opcode at several sizes, offsets and SGE counts with all
 * bytes and completion fields verified on both sides, signaled and
 * unsignaled work, completion channels, SRQs, the provider's rejection of
 * bad work requests, and the error completions an RC QP must produce
 * (after each error both QPs are reset and reconnected).
 *
 *   rc_verify -d DEV [-D PEER_DEV] [-g GID_INDEX] [-G PEER_GID_INDEX]
 *             [-t TIMEOUT_S] [-P] [-X]
 *   rc_verify -d DEV -c HOST [-p PORT] [-D PEER_DEV] [-g GID_INDEX]
 *             [-G PEER_GID_INDEX] [-t TIMEOUT_S] [-P] [-X]
 *   rc_verify -s [-p PORT] [-v]
 *
 * -P: the devices have fabric peers in other processes, so our provider
 * rings CQ_POLL on empty polls (docs/abi.md §14): the check that an empty
 * poll costs nothing then allows doorbells (still no syscall).
 *
 * The requester QP lives on DEV, the responder on PEER_DEV (default: a
 * second context on DEV). The GID index defaults to the first RoCE v2
 * IPv4-mapped GID of the port, else 0. Each QP has its own CQ and
 * completion channel.
 *
 * With -c, the responder lives in another machine (another VM), in an
 * agent started there with -s: PEER_DEV (default: DEV's name) and
 * PEER_GID_INDEX (default as above) name the agent's device and GID. The
 * checks are the same code in both modes: every "side" of a pair (QP, CQ,
 * completion channel, registered buffer; also SRQs and extra MRs) is
 * either local or the agent's, and each operation on a remote one (modify
 * or query the QP, post work, poll the CQ, arm it and wait for its event,
 * fill, write or read the buffer, register an MR, ...) is one request over
 * a TCP connection (PORT, default 18520) that the agent carries out on its
 * own device with the same function, sending back the result: completions
 * and buffer bytes travel whole, so every byte is still compared. The
 * agent waits for its client however long it takes (the caller stops an
 * agent whose client never comes), serves that one client, then exits: 0
 * if the client said goodbye and left nothing behind. Both ends must be this same binary (structures
 * travel as they are in memory).
 *
 * Prints "PASS name" or "FAIL name: why" per check, then
 * "RESULT passed=N failed=M"; exits non-zero on any failure. Every wait
 * for a completion or event gives up after TIMEOUT_S (default 10) seconds
 * and fails the check, and so does a request to the agent unanswered in
 * the same time beyond its own wait: the program never hangs. The agent
 * gives up on a client that does not come within 300 s or goes quiet for
 * 120 s (or 10 x the client's TIMEOUT_S, if longer).
 *
 * -X: the pair is XRC instead of RC. The requester is an XRC_SEND QP on
 * DEV; the responder is an XRC_RECV QP in an XRC domain that PEER_DEV
 * (or the agent) opens with ibv_open_xrcd on a file it creates in /tmp,
 * and receives go to XRC SRQs of that domain: SRQ 0 (the device's PD)
 * and SRQ 1 (a PD of its own), each with a CQ and completion channel of
 * its own, the responder's buffer registered in both PDs. Every request
 * names an SRQ (wr.qp_type.xrc.remote_srqn), and the checks take turns
 * between SRQ 0 and SRQ 1 on the same XRC_SEND -> XRC_RECV connection:
 * the RC checks above that apply to XRC (every opcode, inline data,
 * SGEs (1, half and all), atomics, unsignaled work, events, refused WRs,
 * error statuses; not the basic SRQ checks), receive completions on the
 * named SRQ's CQ with qp_num the XRC_RECV QP's and src_qp the
 * requester's. Then what only XRC has: one chain naming both SRQs, the
 * extended post API (ibv_wr_set_xrc_srqn) with every opcode, receives
 * that outlive the XRC_RECV QP's RESET and ERR, a request naming an SRQ
 * of another XRC domain (SRQ 2, of a second domain on the same device)
 * or no SRQ at all (REM_INV_REQ_ERR), and RDMA keys of a PD other than
 * the named SRQ's (REM_ACCESS_ERR). A device without IBV_DEVICE_XRC
 * (Soft-RoCE) is skipped with a notice; that counts as no failure.
 *
 * Not covered here: SEND_WITH_INV and LOCAL_INV. User space has no memory
 * windows, so it cannot make an rkey that may legitimately be invalidated,
 * and the error an invalidation of a plain MR's key gets is not defined
 * by the IBA; the kernel test covers both opcodes.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <infiniband/verbs.h>

#define PORT		1
#define BUF_SIZE	(256 * 1024)
#define DATA_OFF	8192		/* data windows start here */
#define SPARE_OFF	(BUF_SIZE - 8192) /* small receives, atomics */
#define GUARD		64		/* canary bytes around pieces */
#define CANARY		0xA5
#define QP_DEPTH	64
/* Inline bytes the requester QP asks for (the responder asks for none). */
#define INLINE_WANT	64
#define CQ_DEPTH	256
#define MAX_SGE		16		/* most SGEs a test uses */
#define PSN_A		0x1234
#define PSN_B		0x5678
#define MIN_RNR_TIMER	12		/* 0.64 ms (IBA table 45) */
#define RNR_TIMER_10MS	20		/* 10.24 ms */
#define RNR_TIMER_1MS	14		/* 1.28 ms */
#define RNR_TIMER_245MS	29		/* 245.76 ms */
#define QUIET_MS	300		/* watch for "nothing happens" */

#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
/* IBV_WC_GRH means something for UD only; some RoCE devices set it. */
#define CHECKED_WC_FLAGS (IBV_WC_WITH_IMM | IBV_WC_WITH_INV)

/* The control connection to an agent (-s) */
#define AGENT_PORT	18520
#define MAX_MSG		(BUF_SIZE + 4096) /* largest request or answer */
#define MAX_WRS		8		/* longest WR chain sent to an agent */
#define MAX_OBJ		64		/* sides, SRQs, MRs held by an agent */
#define NAME_LEN	32
#define CONNECT_MS	30000		/* client: reach the agent */
#define IDLE_MS		120000		/* agent: the client goes quiet */

/* -X: the responder's XRC SRQs; 0 and 1 of its domain, 2 of another. */
#define XRC_TGTS	3
#define XRC_OTHER	2
#define XRC_NO_SRQN	0xFFFFFFu	/* an SRQ number nobody has */
/* device_cap_flags_ex: IB_UVERBS_DEVICE_ATOMIC_WRITE (rdma/ib_user_verbs.h) */
#define DEVICE_ATOMIC_WRITE	(1ULL << 40)

struct agent {
	const char *host;
	int fd;				/* -1: lost */
	unsigned long calls;
};

struct dev {
	const char *name;
	struct agent *remote;		/* the agent's device; else ours */
	struct ibv_context *ctx;	/* ours only */
	struct ibv_pd *pd;		/* ours only */
	struct ibv_device_attr attr;
	struct ibv_port_attr port_attr;
	int gid_index;
	union ibv_gid gid;
};

struct srq {
	struct dev *dev;
	struct ibv_srq *srq;		/* ours only */
	uint32_t id;			/* the agent's handle */
};

/*
 * -X: one XRC SRQ of the responder, with the CQ (and channel) its
 * receives complete on and the PD that keys naming it are checked
 * against (an MR over the side's whole buffer in that PD).
 */
struct xrc_tgt {
	struct srq srq;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_pd *pd;		/* the device's, or pd1 */
	struct ibv_mr *mr;		/* the side's buffer in pd */
};

/* What an XRC_RECV side holds besides its QP (ours only). */
struct xrc {
	char path[2][64];		/* the files naming the domains */
	int fd[2];
	struct ibv_xrcd *xrcd[2];	/* the QP's domain, another */
	struct ibv_pd *pd1;		/* SRQ 1's PD */
	struct ibv_mr *mr1;		/* the side's buffer in pd1 */
	uint32_t max_sge;		/* asked of each SRQ */
	struct xrc_tgt tgt[XRC_TGTS];
};

/* An XRC SRQ's number, and the keys of the side's buffer in its PD. */
struct xrc_keys {
	uint32_t srqn, lkey, rkey;
};

/*
 * One end of a pair. Local: the verbs objects are ours. Remote (dev on an
 * agent): only id, qpn, keys, addr and cap are known here.
 */
struct side {
	const char *name;
	struct dev *dev;
	uint32_t id;			/* the agent's handle */
	struct ibv_comp_channel *ch;	/* ours only: ch, cq, qp, mr, buf */
	struct ibv_cq *cq;
	struct srq *srq;		/* receives from here; not owned */
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint32_t qpn;			/* qp's number */
	uint32_t lkey, rkey;		/* mr's keys */
	uint64_t addr;			/* buf's address where it lives */
	struct ibv_qp_cap cap;
	uint32_t psn;
	enum ibv_qp_type type;		/* RC, XRC_SEND or XRC_RECV */
	struct ibv_pd *pd;		/* ours only: of mr (XRC: of tgt) */
	/* XRC_SEND: the extended post API (ours only), the SRQ named. */
	struct ibv_qp_ex *qpx;
	bool atomic_write;		/* qpx offers ATOMIC_WRITE */
	uint32_t remote_srqn;
	/*
	 * XRC_RECV: its SRQs, one of which (tgt) receives, lends ch, cq,
	 * srq, pd, lkey and rkey, and is the one requests name.
	 */
	struct xrc *xrc;		/* ours only */
	int tgt;
	struct xrc_keys tk[XRC_TGTS];
};

/* An extra MR over part of a side's buffer. */
struct mr {
	struct side *side;
	struct ibv_mr *mr;		/* ours only */
	uint32_t id;			/* the agent's handle */
	uint32_t lkey, rkey;
};

/*
 * Requester a, responder b; both are connected and can send. The
 * requester is always ours (its buffer is read and written directly);
 * the responder may be an agent's.
 */
struct pair {
	const char *name;
	struct side a, b;
	bool dirty;			/* a check failed: reconnect first */
};

/* One scatter/gather layout inside a side's buffer. */
struct pieces {
	int n;
	size_t off[MAX_SGE];
	size_t len[MAX_SGE];
	size_t lo, hi;			/* window, guards included */
};

/* What a completion must look like. */
struct expect {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_status alt_status;	/* also accepted, if not SUCCESS */
	int opcode;			/* -1: not defined (error) */
	int64_t byte_len;		/* -1: not defined */
	uint32_t qp_num;
	bool recv;			/* wc_flags defined */
	unsigned int wc_flags;		/* of CHECKED_WC_FLAGS */
	uint32_t imm;			/* host order, if WITH_IMM */
	uint32_t src_qp;		/* 0 or this; 0: not checked */
};

static int timeout_ms = 10000;
static uint8_t rd_atomic = 1;
static enum ibv_mtu path_mtu = IBV_MTU_1024;
static uint64_t next_wr_id = 1;
static char why[512];
static int nr_pass, nr_fail;
static bool verbose;
/* -P: the device asks for CQ_POLL doorbells on empty polls (its fabric has
 * peers in other processes), so the idle-poll check allows them. */
static bool cq_poll_doorbells;
/*
 * The responder is not a pvrdma device (an agent on a native device, as
 * with backend=ibverbs in nested QEMU): what only its own provider or
 * device decides (the IBA leaves it open, or the device departs from it)
 * is not judged; every check of ours still is.
 */
static bool native_peer;
#define PVRDMA_VENDOR_ID	0x15ad
/*
 * -X on pvrdma devices: a receive completion must name the sender in
 * src_qp (ours does for RC and XRC alike; RC leaves it optional below).
 */
static bool src_qp_required;

__attribute__((format(printf, 1, 2)))
static int bad(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return -1;
}

/* Put context in front of the reason already recorded. */
static int annotate(const char *context)
{
	char tmp[sizeof(why)];

	snprintf(tmp, sizeof(tmp), "%s", why);
	return bad("%s: %s", context, tmp);
}

/* Report one check; a failure marks the pair for reconnection. */
__attribute__((format(printf, 3, 4)))
static void report(struct pair *p, int ret, const char *fmt, ...)
{
	char name[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);

	if (ret) {
		printf("FAIL %s: %s\n", name, why);
		nr_fail++;
		if (p)
			p->dirty = true;
	} else {
		printf("PASS %s\n", name);
		nr_pass++;
	}
	fflush(stdout);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void sleep_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000,
			       .tv_nsec = (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* A byte stream that differs at every shift, so misplaced data shows. */
static void fill_pattern(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u | 1;
	size_t i;

	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* ---- control connection: messages ---------------------------------------- */

/*
 * A request is a header { op, length } and a payload; an answer is a
 * header { result, length } and a payload: the operation's output, or
 * for a negative result the reason (the agent's `why`). Fields travel in
 * the machine's own byte order and layout: both ends are this binary.
 */
enum agent_op {
	OP_OPEN = 1, OP_SIDE_CREATE, OP_SIDE_DESTROY, OP_MODIFY_QP,
	OP_QUERY_QP, OP_POST_SEND, OP_POST_RECV, OP_POLL, OP_NOTIFY,
	OP_WAIT_EVENT, OP_BUF_SET, OP_BUF_PUT, OP_BUF_GET, OP_REG_MR,
	OP_DEREG_MR, OP_SRQ_CREATE, OP_SRQ_QUERY, OP_SRQ_MODIFY,
	OP_SRQ_DESTROY, OP_IDLE_POLLS, OP_BYE, OP_XRC_SELECT, OP_XRC_RENEW,
	OP_MAX
};

static const char *const op_names[OP_MAX] = {
	[OP_OPEN] = "open", [OP_SIDE_CREATE] = "side_create",
	[OP_SIDE_DESTROY] = "side_destroy", [OP_MODIFY_QP] = "modify_qp",
	[OP_QUERY_QP] = "query_qp", [OP_POST_SEND] = "post_send",
	[OP_POST_RECV] = "post_recv", [OP_POLL] = "poll",
	[OP_NOTIFY] = "notify", [OP_WAIT_EVENT] = "wait_event",
	[OP_BUF_SET] = "buf_set", [OP_BUF_PUT] = "buf_put",
	[OP_BUF_GET] = "buf_get", [OP_REG_MR] = "reg_mr",
	[OP_DEREG_MR] = "dereg_mr", [OP_SRQ_CREATE] = "srq_create",
	[OP_SRQ_QUERY] = "srq_query", [OP_SRQ_MODIFY] = "srq_modify",
	[OP_SRQ_DESTROY] = "srq_destroy", [OP_IDLE_POLLS] = "idle_polls",
	[OP_BYE] = "bye", [OP_XRC_SELECT] = "xrc_select",
	[OP_XRC_RENEW] = "xrc_renew",
};

static const char *op_name_of(uint32_t op)
{
	return op < OP_MAX && op_names[op] ? op_names[op] : "unknown";
}

struct msg {
	uint8_t *b;
	size_t len, pos;
	bool bad;			/* overrun: malformed or too large */
};

struct hdr {
	uint32_t word;			/* op, or the answer's result */
	uint32_t len;
};

/* The request and the answer (the client's or the agent's). */
static uint8_t rq_buf[MAX_MSG], rs_buf[MAX_MSG];
static struct msg rq = { .b = rq_buf }, rs = { .b = rs_buf };

static struct msg *msg_reset(struct msg *m)
{
	m->len = m->pos = 0;
	m->bad = false;
	return m;
}

static void put(struct msg *m, const void *p, size_t n)
{
	if (m->bad || n > MAX_MSG - m->len) {
		m->bad = true;
		return;
	}
	if (n)
		memcpy(m->b + m->len, p, n);
	m->len += n;
}

static void get(struct msg *m, void *p, size_t n)
{
	if (m->bad || n > m->len - m->pos) {
		m->bad = true;
		memset(p, 0, n);
		return;
	}
	if (n)
		memcpy(p, m->b + m->pos, n);
	m->pos += n;
}

static void put_u32(struct msg *m, uint32_t v)
{
	put(m, &v, sizeof(v));
}

static void put_u64(struct msg *m, uint64_t v)
{
	put(m, &v, sizeof(v));
}

static uint32_t get_u32(struct msg *m)
{
	uint32_t v;

	get(m, &v, sizeof(v));
	return v;
}

static uint64_t get_u64(struct msg *m)
{
	uint64_t v;

	get(m, &v, sizeof(v));
	return v;
}

/* s in a field of size bytes, cut short and zero-padded. */
static void put_str(struct msg *m, const char *s, size_t size)
{
	if (m->bad || !size || size > MAX_MSG - m->len) {
		m->bad = true;
		return;
	}
	memset(m->b + m->len, 0, size);
	memcpy(m->b + m->len, s, strnlen(s, size - 1));
	m->len += size;
}

static void get_str(struct msg *m, char *s, size_t size)
{
	get(m, s, size);
	s[size - 1] = 0;
}

/* Move len bytes to (out) or from fd before the deadline. */
static int io_all(int fd, void *buf, size_t len, bool out,
		  long long deadline, const char *peer)
{
	uint8_t *p = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd,
				      .events = out ? POLLOUT : POLLIN };
		long long left = deadline - now_ms();
		ssize_t n;
		int ret;

		if (left <= 0)
			return bad("%s: no %s within the time allowed", peer,
				   out ? "room to send" : "answer");
		ret = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (ret < 0 && errno != EINTR)
			return bad("%s: poll: %s", peer, strerror(errno));
		if (ret <= 0)
			continue;
		n = out ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT) :
			  recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR)
				continue;
			return bad("%s: %s: %s", peer, out ? "send" : "recv",
				   strerror(errno));
		}
		if (n == 0)
			return bad("%s: connection closed", peer);
		p += n;
		len -= n;
	}
	return 0;
}

static int msg_send(int fd, uint32_t word, const struct msg *m,
		    long long deadline, const char *peer)
{
	struct hdr h = { .word = word, .len = (uint32_t)m->len };

	if (io_all(fd, &h, sizeof(h), true, deadline, peer) ||
	    io_all(fd, m->b, m->len, true, deadline, peer))
		return -1;
	return 0;
}

static int msg_recv(int fd, uint32_t *word, struct msg *m,
		    long long deadline, const char *peer)
{
	struct hdr h;

	msg_reset(m);
	if (io_all(fd, &h, sizeof(h), false, deadline, peer))
		return -1;
	if (h.len > MAX_MSG)
		return bad("%s: message of %u bytes", peer, h.len);
	if (io_all(fd, m->b, h.len, false, deadline, peer))
		return -1;
	m->len = h.len;
	*word = h.word;
	return 0;
}

/* ---- control connection: the client's end -------------------------------- */

static void agent_lost(struct agent *ag)
{
	if (ag->fd >= 0)
		close(ag->fd);
	ag->fd = -1;
}

/* A new request to the agent: fill it, then call rpc(). */
static struct msg *req(void)
{
	return msg_reset(&rq);
}

/*
 * Send the request, wait for the answer: the agent's result (>= 0; the
 * output is in rs), or -1 with why (the agent's reason, or what went
 * wrong on the way). wait_ms is how long the operation itself may take
 * on the agent; the answer may take timeout_ms beyond it. A connection
 * that failed once stays failed: every later request fails at once.
 */
static int rpc(struct agent *ag, uint32_t op, int wait_ms)
{
	long long deadline = now_ms() + wait_ms + timeout_ms;
	char peer[96];
	uint32_t word;
	size_t n;

	snprintf(peer, sizeof(peer), "agent at %s (%s)", ag->host,
		 op_name_of(op));
	if (ag->fd < 0)
		return bad("%s: the connection was lost earlier", peer);
	if (rq.bad)
		return bad("%s: request too large", peer);
	if (msg_send(ag->fd, op, &rq, deadline, peer) ||
	    msg_recv(ag->fd, &word, &rs, deadline, peer)) {
		agent_lost(ag);
		return -1;
	}
	ag->calls++;
	if ((int32_t)word >= 0)
		return (int32_t)word;
	n = rs.len < sizeof(why) - 1 ? rs.len : sizeof(why) - 1;
	memcpy(why, rs.b, n);
	why[n] = 0;
	return -1;
}

/* After reading an answer: was it as long as it should be? */
static int rpc_done(struct agent *ag)
{
	if (!rs.bad && rs.pos == rs.len)
		return 0;
	agent_lost(ag);
	return bad("agent at %s: malformed answer", ag->host);
}

static int agent_connect(struct agent *ag, const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM };
	long long deadline = now_ms() + CONNECT_MS;
	struct addrinfo *res;
	char svc[16];
	int fd, err, one = 1;

	ag->host = host;
	ag->fd = -1;
	snprintf(svc, sizeof(svc), "%d", port);
	err = getaddrinfo(host, svc, &hints, &res);
	if (err)
		return bad("agent at %s: %s", host, gai_strerror(err));
	for (;;) {
		fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK |
			    SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err = errno;
			break;
		}
		err = 0;
		if (connect(fd, res->ai_addr, res->ai_addrlen)) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			socklen_t len = sizeof(err);

			err = errno;
			if (err == EINPROGRESS) {
				err = ETIMEDOUT;
				if (poll(&pfd, 1, 2000) > 0 &&
				    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
					       &len))
					err = errno;
			}
		}
		if (!err)
			break;
		close(fd);
		fd = -1;
		if (now_ms() + 500 > deadline)
			break;
		sleep_us(500000);
	}
	freeaddrinfo(res);
	if (fd < 0)
		return bad("agent at %s port %d: %s", host, port,
			   strerror(err));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ag->fd = fd;
	return 0;
}

/* ---- sides: the operations, on our device or the agent's ---------------- */

static struct agent *remote_of(const struct side *s)
{
	return s->dev ? s->dev->remote : NULL;
}

/*
 * Poll s's CQ until n completions or wait_ms have passed (napping nap_us
 * between empty polls); returns how many, or -1. wait_ms 0: poll once.
 */
static int side_poll(struct side *s, struct ibv_wc *wc, int n, int wait_ms,
		     long nap_us)
{
	struct agent *ag = remote_of(s);
	long long deadline;
	int got = 0, ret;

	if (ag) {
		struct msg *m = req();

		put_u32(m, s->id);
		put_u32(m, n);
		put_u32(m, wait_ms);
		put_u32(m, (uint32_t)nap_us);
		got = rpc(ag, OP_POLL, wait_ms);
		if (got < 0)
			return -1;
		if (got > n) {
			agent_lost(ag);
			return bad("agent at %s: %d completions for %d",
				   ag->host, got, n);
		}
		get(&rs, wc, got * sizeof(*wc));
		return rpc_done(ag) ? -1 : got;
	}
	deadline = now_ms() + wait_ms;
	for (;;) {
		ret = ibv_poll_cq(s->cq, n - got, wc + got);
		if (ret < 0)
			return bad("%s: ibv_poll_cq returned %d", s->name, ret);
		got += ret;
		if (got == n || now_ms() >= deadline)
			return got;
		sleep_us(nap_us);
	}
}

static int side_notify(struct side *s, int solicited_only)
{
	struct agent *ag = remote_of(s);

	if (ag) {
		struct msg *m = req();

		put_u32(m, s->id);
		put_u32(m, solicited_only);
		return rpc(ag, OP_NOTIFY, 0) < 0 || rpc_done(ag) ? -1 : 0;
	}
	if (ibv_req_notify_cq(s->cq, solicited_only))
		return bad("ibv_req_notify_cq failed");
	return 0;
}

/* 1: an event for s's CQ arrived within ms, 0: none did, -1: error. */
static int wait_cq_event(struct side *s, int ms)
{
	struct agent *ag = remote_of(s);
	struct pollfd pfd;
	struct ibv_cq *cq;
	void *cq_ctx;
	int ret;

	if (ag) {
		struct msg *m = req();

		put_u32(m, s->id);
		put_u32(m, ms);
		ret = rpc(ag, OP_WAIT_EVENT, ms);
		return ret < 0 || rpc_done(ag) ? -1 : ret;
	}
	pfd = (struct pollfd){ .fd = s->ch->fd, .events = POLLIN };
	ret = poll(&pfd, 1, ms);
	if (ret < 0)
		return bad("%s: poll on the channel: %s", s->name,
			   strerror(errno));
	if (ret == 0)
		return 0;
	if (ibv_get_cq_event(s->ch, &cq, &cq_ctx))
		return bad("%s: ibv_get_cq_event: %s", s->name,
			   strerror(errno));
	ibv_ack_cq_events(cq, 1);
	if (cq != s->cq)
		return bad("%s: event for another CQ", s->name);
	return 1;
}

static int put_send_wrs(struct msg *m, const struct ibv_send_wr *wr)
{
	const struct ibv_send_wr *w;
	uint32_t n = 0;

	for (w = wr; w; w = w->next)
		n++;
	if (n > MAX_WRS)
		return bad("a chain of %u WRs is too long for the agent", n);
	put_u32(m, n);
	for (w = wr; w; w = w->next) {
		if (w->num_sge < 0 || w->num_sge > MAX_SGE + 1)
			return bad("%d SGEs are too many for the agent",
				   w->num_sge);
		put_u64(m, w->wr_id);
		put_u32(m, w->opcode);
		put_u32(m, w->send_flags);
		put_u32(m, w->imm_data);
		put(m, &w->wr, sizeof(w->wr));
		put_u32(m, w->num_sge);
		put(m, w->sg_list, w->num_sge * sizeof(struct ibv_sge));
	}
	return 0;
}

/* The chain's WRs into wr[] (SGEs into sge[][]); -1: malformed. */
static int get_send_wrs(struct msg *m, struct ibv_send_wr *wr,
			struct ibv_sge (*sge)[MAX_SGE + 1])
{
	uint32_t n = get_u32(m), i;

	if (m->bad || n > MAX_WRS)
		return -1;
	for (i = 0; i < n; i++) {
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = get_u64(m);
		wr[i].opcode = get_u32(m);
		wr[i].send_flags = get_u32(m);
		wr[i].imm_data = get_u32(m);
		get(m, &wr[i].wr, sizeof(wr[i].wr));
		wr[i].num_sge = (int)get_u32(m);
		if (m->bad || wr[i].num_sge < 0 ||
		    wr[i].num_sge > MAX_SGE + 1)
			return -1;
		get(m, sge[i], wr[i].num_sge * sizeof(struct ibv_sge));
		wr[i].sg_list = sge[i];
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	return m->bad || !n ? -1 : 0;
}

static int put_recv_wrs(struct msg *m, const struct ibv_recv_wr *wr)
{
	const struct ibv_recv_wr *w;
	uint32_t n = 0;

	for (w = wr; w; w = w->next)
		n++;
	if (n > MAX_WRS)
		return bad("a chain of %u WRs is too long for the agent", n);
	put_u32(m, n);
	for (w = wr; w; w = w->next) {
		if (w->num_sge < 0 || w->num_sge > MAX_SGE + 1)
			return bad("%d SGEs are too many for the agent",
				   w->num_sge);
		put_u64(m, w->wr_id);
		put_u32(m, w->num_sge);
		put(m, w->sg_list, w->num_sge * sizeof(struct ibv_sge));
	}
	return 0;
}

static int get_recv_wrs(struct msg *m, struct ibv_recv_wr *wr,
			struct ibv_sge (*sge)[MAX_SGE + 1])
{
	uint32_t n = get_u32(m), i;

	if (m->bad || n > MAX_WRS)
		return -1;
	for (i = 0; i < n; i++) {
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = get_u64(m);
		wr[i].num_sge = (int)get_u32(m);
		if (m->bad || wr[i].num_sge < 0 ||
		    wr[i].num_sge > MAX_SGE + 1)
			return -1;
		get(m, sge[i], wr[i].num_sge * sizeof(struct ibv_sge));
		wr[i].sg_list = sge[i];
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	return m->bad || !n ? -1 : 0;
}

/* The position of bad in the chain wr, or -1 if it is not in it. */
static int32_t chain_index(const void *wr, const void *bad_wr, bool send)
{
	int32_t i = 0;

	while (wr) {
		if (wr == bad_wr)
			return i;
		wr = send ? (const void *)((const struct ibv_send_wr *)wr)->next :
			    (const void *)((const struct ibv_recv_wr *)wr)->next;
		i++;
	}
	return -1;
}

static void *chain_at(void *wr, int32_t idx, bool send)
{
	while (wr && idx-- > 0)
		wr = send ? (void *)((struct ibv_send_wr *)wr)->next :
			    (void *)((struct ibv_recv_wr *)wr)->next;
	return idx < 0 ? wr : NULL;
}

/*
 * ibv_post_send on s's QP: *err is what it returned, *bad_wr what it
 * pointed at; -1 only if the request did not reach the agent.
 */
static int side_post_send(struct side *s, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad_wr, int *err)
{
	struct agent *ag = remote_of(s);
	int32_t idx;

	if (ag) {
		struct msg *m = req();

		put_u32(m, s->id);
		if (put_send_wrs(m, wr) || rpc(ag, OP_POST_SEND, 0) < 0)
			return -1;
		*err = (int32_t)get_u32(&rs);
		idx = (int32_t)get_u32(&rs);
		if (rpc_done(ag))
			return -1;
		*bad_wr = idx < 0 ? NULL : chain_at(wr, idx, true);
		return 0;
	}
	*err = ibv_post_send(s->qp, wr, bad_wr);
	return 0;
}

/*
 * A receive for s: on its SRQ if it has one, unless to_qp (then on the
 * QP regardless). As side_post_send.
 */
static int side_post_recv(struct side *s, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr, bool to_qp, int *err)
{
	struct agent *ag = remote_of(s);
	int32_t idx;

	if (ag) {
		struct msg *m = req();

		put_u32(m, s->id);
		put_u32(m, to_qp);
		if (put_recv_wrs(m, wr) || rpc(ag, OP_POST_RECV, 0) < 0)
			return -1;
		*err = (int32_t)get_u32(&rs);
		idx = (int32_t)get_u32(&rs);
		if (rpc_done(ag))
			return -1;
		*bad_wr = idx < 0 ? NULL : chain_at(wr, idx, false);
		return 0;
	}
	if (s->srq && !to_qp)
		*err = ibv_post_srq_recv(s->srq->srq, wr, bad_wr);
	else
		*err = ibv_post_recv(s->qp, wr, bad_wr);
	return 0;
}

static int buf_range(const struct side *s, size_t off, size_t len)
{
	if (off > BUF_SIZE || len > BUF_SIZE - off)
		return bad("%s: %zu bytes at %zu are outside the buffer",
			   s->name, len, off);
	return 0;
}

/* Set len bytes of s's buffer at off to c. */
static int buf_set(struct side *s, size_t off, int c, size_t len)
{
	struct agent *ag = remote_of(s);

	if (ag) {
		struct msg *m = req();

		put_u32(m, s->id);
		put_u32(m, off);
		put_u32(m, len);
		put_u32(m, (uint8_t)c);
		return rpc(ag, OP_BUF_SET, 0) < 0 || rpc_done(ag) ? -1 : 0;
	}
	if (buf_range(s, off, len))
		return -1;
	memset(s->buf + off, c, len);
	return 0;
}

/* Copy len bytes from data into s's buffer at off. */
static int buf_put(struct side *s, size_t off, const void *data, size_t len)
{
	struct agent *ag = remote_of(s);

	if (ag) {
		struct msg *m = req();

		put_u32(m, s->id);
		put_u32(m, off);
		put_u32(m, len);
		put(m, data, len);
		return rpc(ag, OP_BUF_PUT, 0) < 0 || rpc_done(ag) ? -1 : 0;
	}
	if (buf_range(s, off, len))
		return -1;
	memcpy(s->buf + off, data, len);
	return 0;
}

/* Copy len bytes at off in s's buffer to data. */
static int buf_get(struct side *s, size_t off, void *data, size_t len)
{
	struct agent *ag = remote_of(s);

	if (ag) {
		struct msg *m = req();

		put_u32(m, s->id);
		put_u32(m, off);
		put_u32(m, len);
		if (rpc(ag, OP_BUF_GET, 0) < 0)
			return -1;
		get(&rs, data, len);
		return rpc_done(ag);
	}
	if (buf_range(s, off, len))
		return -1;
	memcpy(data, s->buf + off, len);
	return 0;
}

/* s's buffer holds want at off; else fail with what. */
static int expect_bytes(struct side *s, size_t off, const void *want,
			size_t len, const char *what)
{
	uint8_t *got = malloc(len);
	int ret;

	if (!got)
		return bad("out of memory");
	ret = buf_get(s, off, got, len);
	if (!ret && memcmp(got, want, len))
		ret = bad("%s", what);
	free(got);
	return ret;
}

/* Register len bytes at off in s's buffer with access as m. */
static int mr_reg(struct mr *m, struct side *s, size_t off, size_t len,
		  int access)
{
	struct agent *ag = remote_of(s);
	int ret;

	memset(m, 0, sizeof(*m));
	m->side = s;
	if (ag) {
		struct msg *q = req();

		put_u32(q, s->id);
		put_u32(q, off);
		put_u32(q, len);
		put_u32(q, access);
		ret = rpc(ag, OP_REG_MR, 0);
		if (ret < 0)
			return -1;
		m->id = get_u32(&rs);
		m->lkey = get_u32(&rs);
		m->rkey = get_u32(&rs);
		return rpc_done(ag);
	}
	if (buf_range(s, off, len))
		return -1;
	m->mr = ibv_reg_mr(s->pd, s->buf + off, len, access);
	if (!m->mr)
		return bad("%s: ibv_reg_mr: %s", s->name, strerror(errno));
	m->lkey = m->mr->lkey;
	m->rkey = m->mr->rkey;
	return 0;
}

static int mr_dereg(struct mr *m)
{
	struct agent *ag = remote_of(m->side);

	if (ag) {
		struct msg *q = req();

		put_u32(q, m->id);
		return rpc(ag, OP_DEREG_MR, 0) < 0 || rpc_done(ag) ? -1 : 0;
	}
	if (ibv_dereg_mr(m->mr))
		return bad("%s: ibv_dereg_mr failed", m->side->name);
	return 0;
}

static int modify(struct side *s, struct ibv_qp_attr *attr, int mask,
		  const char *to)
{
	struct agent *ag = remote_of(s);
	int ret;

	if (ag) {
		struct msg *m = req();

		put_u32(m, s->id);
		put(m, attr, sizeof(*attr));
		put_u32(m, mask);
		put_str(m, to, NAME_LEN);
		return rpc(ag, OP_MODIFY_QP, 0) < 0 || rpc_done(ag) ? -1 : 0;
	}
	ret = ibv_modify_qp(s->qp, attr, mask);
	if (ret)
		return bad("%s: modify QP to %s: %s", s->name, to,
			   strerror(ret));
	return 0;
}

/* ibv_query_qp; of init, only the caps come from an agent. */
static int side_query_qp(struct side *s, struct ibv_qp_attr *attr, int mask,
			 struct ibv_qp_init_attr *init)
{
	struct agent *ag = remote_of(s);

	if (ag) {
		struct msg *m = req();

		put_u32(m, s->id);
		put_u32(m, mask);
		if (rpc(ag, OP_QUERY_QP, 0) < 0)
			return -1;
		memset(init, 0, sizeof(*init));
		get(&rs, attr, sizeof(*attr));
		get(&rs, &init->cap, sizeof(init->cap));
		return rpc_done(ag);
	}
	if (ibv_query_qp(s->qp, attr, mask, init))
		return bad("ibv_query_qp failed");
	return 0;
}

static int srq_create(struct srq *q, struct dev *d,
		      const struct ibv_srq_attr *attr)
{
	struct ibv_srq_init_attr init = { .attr = *attr };

	memset(q, 0, sizeof(*q));
	q->dev = d;
	if (d->remote) {
		struct msg *m = req();

		put(m, attr, sizeof(*attr));
		if (rpc(d->remote, OP_SRQ_CREATE, 0) < 0)
			return -1;
		q->id = get_u32(&rs);
		return rpc_done(d->remote);
	}
	q->srq = ibv_create_srq(d->pd, &init);
	if (!q->srq)
		return bad("ibv_create_srq: %s", strerror(errno));
	return 0;
}

static int srq_query(struct srq *q, struct ibv_srq_attr *attr)
{
	if (q->dev->remote) {
		struct msg *m = req();

		put_u32(m, q->id);
		if (rpc(q->dev->remote, OP_SRQ_QUERY, 0) < 0)
			return -1;
		get(&rs, attr, sizeof(*attr));
		return rpc_done(q->dev->remote);
	}
	if (ibv_query_srq(q->srq, attr))
		return bad("ibv_query_srq failed");
	return 0;
}

static int srq_modify(struct srq *q, struct ibv_srq_attr *attr, int mask)
{
	if (q->dev->remote) {
		struct msg *m = req();

		put_u32(m, q->id);
		put(m, attr, sizeof(*attr));
		put_u32(m, mask);
		return rpc(q->dev->remote, OP_SRQ_MODIFY, 0) < 0 ||
		       rpc_done(q->dev->remote) ? -1 : 0;
	}
	if (ibv_modify_srq(q->srq, attr, mask))
		return bad("ibv_modify_srq(%#x) failed", mask);
	return 0;
}

static int srq_destroy(struct srq *q)
{
	int ret = 0;

	if (q->dev && q->dev->remote) {
		struct msg *m = req();

		put_u32(m, q->id);
		ret = rpc(q->dev->remote, OP_SRQ_DESTROY, 0) < 0 ||
		      rpc_done(q->dev->remote) ? -1 : 0;
	} else if (q->srq && ibv_destroy_srq(q->srq)) {
		ret = bad("ibv_destroy_srq failed");
	}
	memset(q, 0, sizeof(*q));
	return ret;
}

/* ---- completions --------------------------------------------------------- */

/* Poll exactly n completions, giving up after the timeout. */
static int poll_n(struct side *s, struct ibv_wc *wc, int n)
{
	int got = side_poll(s, wc, n, timeout_ms, 50);

	if (got < 0)
		return -1;
	if (got < n)
		return bad("%s: %d of %d completions after %d s", s->name,
			   got, n, timeout_ms / 1000);
	return 0;
}

/* No completion may show up on s within QUIET_MS. */
static int expect_quiet_cq(struct side *s)
{
	struct ibv_wc wc;
	int ret = side_poll(s, &wc, 1, QUIET_MS, 1000);

	if (ret < 0)
		return -1;
	if (ret)
		return bad("%s: unexpected completion wr_id %" PRIu64
			   " status %s opcode %d", s->name, wc.wr_id,
			   ibv_wc_status_str(wc.status), wc.opcode);
	return 0;
}

/*
 * No completion waits on s now. Enough where the requester has seen its
 * own completion (a responder writes its CQEs before it answers), and
 * without expect_quiet_cq's wait.
 */
static int expect_no_cqe(struct side *s)
{
	struct ibv_wc wc;
	int ret = side_poll(s, &wc, 1, 0, 0);

	if (ret < 0)
		return -1;
	if (ret)
		return bad("%s: unexpected completion wr_id %" PRIu64
			   " status %s opcode %d", s->name, wc.wr_id,
			   ibv_wc_status_str(wc.status), wc.opcode);
	return 0;
}

/* Take whatever completions are left, without judging them. */
static void drain_cq(struct side *s)
{
	struct ibv_wc wc[16];

	while (side_poll(s, wc, 16, 0, 0) > 0)
		;
}

static int check_wc(const struct side *s, const struct ibv_wc *wc,
		    const struct expect *e)
{
	if (wc->wr_id != e->wr_id)
		return bad("%s: wr_id %" PRIu64 ", expected %" PRIu64
			   " (status %s)", s->name, wc->wr_id, e->wr_id,
			   ibv_wc_status_str(wc->status));
	if (wc->status != e->status &&
	    (e->alt_status == IBV_WC_SUCCESS || wc->status != e->alt_status))
		return bad("%s: status %s (vendor_err %#x), expected %s",
			   s->name, ibv_wc_status_str(wc->status),
			   wc->vendor_err, ibv_wc_status_str(e->status));
	if (wc->qp_num != e->qp_num)
		return bad("%s: qp_num %#x, expected %#x", s->name,
			   wc->qp_num, e->qp_num);
	/* IBA: only wr_id, status and qp_num are defined on errors. */
	if (e->status != IBV_WC_SUCCESS)
		return 0;
	if (e->opcode >= 0 && (int)wc->opcode != e->opcode)
		return bad("%s: opcode %d, expected %d", s->name, wc->opcode,
			   e->opcode);
	if (e->byte_len >= 0 && wc->byte_len != (uint64_t)e->byte_len)
		return bad("%s: byte_len %u, expected %" PRId64, s->name,
			   wc->byte_len, e->byte_len);
	if (e->recv && (wc->wc_flags & CHECKED_WC_FLAGS) != e->wc_flags)
		return bad("%s: wc_flags %#x, expected %#x", s->name,
			   wc->wc_flags, e->wc_flags);
	if ((e->wc_flags & IBV_WC_WITH_IMM) && be32toh(wc->imm_data) != e->imm)
		return bad("%s: imm_data %#x, expected %#x", s->name,
			   be32toh(wc->imm_data), e->imm);
	/* src_qp is defined for UD only; if an RC CQE has one, it is right. */
	if (e->src_qp && (wc->src_qp || src_qp_required) &&
	    wc->src_qp != e->src_qp)
		return bad("%s: src_qp %#x, expected %#x", s->name,
			   wc->src_qp, e->src_qp);
	return 0;
}

static int expect_wc(struct side *s, const struct expect *e)
{
	struct ibv_wc wc;

	if (poll_n(s, &wc, 1))
		return -1;
	return check_wc(s, &wc, e);
}

/* Requester completion of a successful signaled WR. */
static struct expect send_ok(const struct side *s, uint64_t wr_id, int opcode)
{
	return (struct expect){ .wr_id = wr_id, .status = IBV_WC_SUCCESS,
				.opcode = opcode, .byte_len = -1,
				.qp_num = s->qpn };
}

static struct expect wc_error(const struct side *s, uint64_t wr_id,
			      enum ibv_wc_status status)
{
	return (struct expect){ .wr_id = wr_id, .status = status,
				.opcode = -1, .byte_len = -1,
				.qp_num = s->qpn };
}

/* ---- events -------------------------------------------------------------- */

static int expect_cq_event(struct side *s)
{
	int ret = wait_cq_event(s, timeout_ms);

	if (ret < 0)
		return -1;
	if (!ret)
		return bad("%s: no completion event within %d s", s->name,
			   timeout_ms / 1000);
	return 0;
}

static int expect_no_cq_event(struct side *s)
{
	int ret = wait_cq_event(s, QUIET_MS);

	if (ret < 0)
		return -1;
	if (ret)
		return bad("%s: unexpected completion event", s->name);
	return 0;
}

/* ---- posting ------------------------------------------------------------- */

/*
 * The WRs of an XRC_SEND QP name the responder's SRQ that s targets now
 * (a check naming SRQs WR by WR posts with side_post_send).
 */
static void name_srq(const struct side *s, struct ibv_send_wr *wr)
{
	if (s->type != IBV_QPT_XRC_SEND)
		return;
	for (; wr; wr = wr->next)
		wr->qp_type.xrc.remote_srqn = s->remote_srqn;
}

static int post_send(struct side *s, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad_wr = NULL;
	int ret;

	name_srq(s, wr);
	if (side_post_send(s, wr, &bad_wr, &ret))
		return -1;
	if (ret)
		return bad("%s: ibv_post_send: %s", s->name, strerror(ret));
	return 0;
}

static int post_recv(struct side *s, struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad_wr = NULL;
	int ret;

	if (side_post_recv(s, wr, &bad_wr, false, &ret))
		return -1;
	if (ret)
		return bad("%s: post receive: %s", s->name, strerror(ret));
	return 0;
}

/* A receive of len bytes at off in s's buffer. */
static int post_recv_buf(struct side *s, uint64_t wr_id, size_t off,
			 uint32_t len)
{
	struct ibv_sge sge = { .addr = s->addr + off, .length = len,
			       .lkey = s->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				  .num_sge = 1 };

	return post_recv(s, &wr);
}

/* A signaled SEND of len bytes from off in s's buffer. */
static int post_send_buf(struct side *s, uint64_t wr_id, size_t off,
			 uint32_t len, unsigned int flags)
{
	struct ibv_sge sge = { .addr = s->addr + off, .length = len,
			       .lkey = s->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				  .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED | flags };

	return post_send(s, &wr);
}

/* ---- data layouts -------------------------------------------------------- */

/*
 * len bytes in n pieces from base: nearly equal lengths, separated by odd
 * gaps so that pieces start at odd addresses.
 */
static void layout(struct pieces *pc, size_t base, size_t len, int n)
{
	size_t q = len / n, r = len % n, pos = base;
	int i;

	pc->n = n;
	pc->lo = base - GUARD;
	for (i = 0; i < n; i++) {
		pc->off[i] = pos;
		pc->len[i] = q + ((size_t)i < r);
		pos += pc->len[i];
		if (i < n - 1)
			pos += GUARD + 2 * i + 1;
	}
	pc->hi = pos + GUARD;
}

static void to_sges(const struct side *s, const struct pieces *pc,
		    struct ibv_sge *sge)
{
	int i;

	for (i = 0; i < pc->n; i++) {
		sge[i].addr = s->addr + pc->off[i];
		sge[i].length = pc->len[i];
		sge[i].lkey = s->lkey;
	}
}

/*
 * The window as it must be (from pc->lo to pc->hi): the stream in its
 * pieces, canaries elsewhere. NULL: out of memory.
 */
static uint8_t *window_image(const struct pieces *pc, const uint8_t *stream)
{
	uint8_t *img = malloc(pc->hi - pc->lo);
	size_t pos = 0;
	int i;

	if (!img)
		return NULL;
	memset(img, CANARY, pc->hi - pc->lo);
	for (i = 0; i < pc->n; i++) {
		memcpy(img + pc->off[i] - pc->lo, stream + pos, pc->len[i]);
		pos += pc->len[i];
	}
	return img;
}

/* The window holds the stream in its pieces and canaries elsewhere. */
static int verify_window(struct side *s, const struct pieces *pc,
			 const uint8_t *stream)
{
	size_t n = pc->hi - pc->lo, i;
	uint8_t *exp = window_image(pc, stream), *got = malloc(n);
	int ret = 0;

	if (!exp || !got)
		ret = bad("out of memory");
	else
		ret = buf_get(s, pc->lo, got, n);
	for (i = 0; !ret && i < n; i++) {
		if (got[i] != exp[i]) {
			ret = bad("%s: byte at buffer offset %zu is %#04x, "
				  "expected %#04x", s->name, pc->lo + i,
				  got[i], exp[i]);
			break;
		}
	}
	free(exp);
	free(got);
	return ret;
}

static int verify_canary(struct side *s, size_t off, size_t len)
{
	uint8_t *got = malloc(len);
	size_t i;
	int ret;

	if (!got)
		return bad("out of memory");
	ret = buf_get(s, off, got, len);
	for (i = 0; !ret && i < len; i++)
		if (got[i] != CANARY)
			ret = bad("%s: byte at buffer offset %zu was "
				  "overwritten", s->name, off + i);
	free(got);
	return ret;
}

/* ---- XRC SRQs (-X) ------------------------------------------------------- */

/* s's receives go to its XRC SRQ k from now on (s ours). */
static int xrc_side_select(struct side *s, int k)
{
	struct xrc_tgt *t;

	if (!s->xrc || k < 0 || k >= XRC_TGTS)
		return bad("%s: no XRC SRQ %d", s->name, k);
	t = &s->xrc->tgt[k];
	s->tgt = k;
	s->srq = &t->srq;
	s->ch = t->ch;
	s->cq = t->cq;
	s->pd = t->pd;
	s->lkey = s->tk[k].lkey;
	s->rkey = s->tk[k].rkey;
	return 0;
}

/* XRC SRQ k of s (ours) in its domain, PD and CQ; its number to tk. */
static int xrc_srq_create(struct side *s, int k)
{
	struct xrc *x = s->xrc;
	struct xrc_tgt *t = &x->tgt[k];
	struct ibv_srq_init_attr_ex init = {
		.attr = { .max_wr = QP_DEPTH, .max_sge = x->max_sge },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC,
		.pd = t->pd,
		.xrcd = x->xrcd[k == XRC_OTHER],
		.cq = t->cq,
	};
	int ret;

	t->srq.dev = s->dev;
	t->srq.srq = ibv_create_srq_ex(s->dev->ctx, &init);
	if (!t->srq.srq)
		return bad("%s: ibv_create_srq_ex of XRC SRQ %d: %s", s->name,
			   k, strerror(errno));
	if (init.attr.max_wr < QP_DEPTH || init.attr.max_sge < x->max_sge)
		return bad("%s: XRC SRQ %d has %u WRs of %u SGEs, asked for "
			   "%u of %u", s->name, k, init.attr.max_wr,
			   init.attr.max_sge, QP_DEPTH, x->max_sge);
	ret = ibv_get_srq_num(t->srq.srq, &s->tk[k].srqn);
	if (ret)
		return bad("%s: ibv_get_srq_num: %s", s->name, strerror(ret));
	return 0;
}

/* Take whatever completions and events target t has, unjudged. */
static void xrc_tgt_drain(struct xrc_tgt *t)
{
	struct ibv_wc wc[16];
	struct ibv_cq *cq;
	void *cq_ctx;

	while (ibv_poll_cq(t->cq, 16, wc) > 0)
		;
	while (!ibv_get_cq_event(t->ch, &cq, &cq_ctx))	/* non-blocking */
		ibv_ack_cq_events(cq, 1);
}

/* New XRC SRQs for s (ours): the receives left behind go with the old. */
static int xrc_side_renew(struct side *s)
{
	int k;

	if (!s->xrc)
		return bad("%s: not an XRC_RECV side", s->name);
	for (k = 0; k < XRC_TGTS; k++) {
		struct xrc_tgt *t = &s->xrc->tgt[k];

		if (t->srq.srq && ibv_destroy_srq(t->srq.srq))
			return bad("%s: ibv_destroy_srq of XRC SRQ %d failed",
				   s->name, k);
		t->srq.srq = NULL;
		xrc_tgt_drain(t);
		if (xrc_srq_create(s, k))
			return -1;
	}
	return xrc_side_select(s, s->tgt);
}

/*
 * The pair's requests name the responder's XRC SRQ k from now on, whose
 * CQ, channel and keys the responder side then stands for.
 */
static int xrc_select(struct pair *p, int k)
{
	static const char *const names[XRC_TGTS] = {
		"xrc/srq0", "xrc/srq1", "xrc/other-domain",
	};
	struct side *b = &p->b;
	struct agent *ag = remote_of(b);

	if (k < 0 || k >= XRC_TGTS)
		return bad("no XRC SRQ %d", k);
	if (ag) {
		struct msg *m = req();

		put_u32(m, b->id);
		put_u32(m, k);
		if (rpc(ag, OP_XRC_SELECT, 0) < 0 || rpc_done(ag))
			return -1;
		b->tgt = k;
		b->lkey = b->tk[k].lkey;
		b->rkey = b->tk[k].rkey;
	} else if (xrc_side_select(b, k)) {
		return -1;
	}
	p->a.remote_srqn = b->tk[k].srqn;
	p->name = names[k];
	return 0;
}

/* After a failed check: new XRC SRQs, whatever receives it left gone. */
static int xrc_renew(struct pair *p)
{
	struct side *b = &p->b;
	struct agent *ag = remote_of(b);

	if (ag) {
		struct msg *m = req();

		put_u32(m, b->id);
		if (rpc(ag, OP_XRC_RENEW, 0) < 0)
			return -1;
		get(&rs, b->tk, sizeof(b->tk));
		if (rpc_done(ag))
			return -1;
	} else if (xrc_side_renew(b)) {
		return -1;
	}
	return xrc_select(p, b->tgt);
}

/* -X: the checks take turns between SRQ 0 and SRQ 1 of the domain. */
static void xrc_turn(struct pair *p)
{
	int k = p->b.tgt == 0;

	if (p->b.type == IBV_QPT_XRC_RECV && xrc_select(p, k))
		report(p, -1, "%s: name XRC SRQ %d next", p->name, k);
}

/* ---- QP state ------------------------------------------------------------ */

static int qp_to_init(struct side *s)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = PORT,
		.qp_access_flags = ALL_ACCESS,
	};

	return modify(s, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
		      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
}

/* RoCE: the path is the peer's GID, no DMAC needed from us. */
static int qp_to_rtr(struct side *s, const struct side *peer,
		     uint8_t min_rnr_timer)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = path_mtu,
		.dest_qp_num = peer->qpn,
		.rq_psn = peer->psn,
		.max_dest_rd_atomic = rd_atomic,
		.min_rnr_timer = min_rnr_timer,
		.ah_attr = {
			.is_global = 1,
			.grh = {
				.dgid = peer->dev->gid,
				.sgid_index = s->dev->gid_index,
				.hop_limit = 64,
			},
			.port_num = PORT,
		},
	};

	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
		   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

	/* An XRC_SEND QP responds to nothing (IBA 10.3.1). */
	if (s->type != IBV_QPT_XRC_SEND)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return modify(s, &attr, mask, "RTR");
}

static int qp_to_rts(struct side *s, uint8_t rnr_retry)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = s->psn,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = rnr_retry,
		.max_rd_atomic = rd_atomic,
	};

	/* An XRC_RECV QP requests nothing (IBA 10.3.1). */
	if (s->type == IBV_QPT_XRC_RECV)
		return modify(s, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN |
			      IBV_QP_TIMEOUT, "RTS");
	return modify(s, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN |
		      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		      IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
}

static int qp_to_state(struct side *s, enum ibv_qp_state state,
		       const char *name)
{
	struct ibv_qp_attr attr = { .qp_state = state };

	return modify(s, &attr, IBV_QP_STATE, name);
}

/*
 * Connect a and b both ways; rnr_retry is a's, min_rnr_timer b's (b
 * keeps the defaults for its own sends).
 */
static int connect_pair(struct pair *p, uint8_t a_rnr_retry,
			uint8_t b_min_rnr_timer)
{
	if (qp_to_init(&p->a) || qp_to_init(&p->b) ||
	    qp_to_rtr(&p->a, &p->b, MIN_RNR_TIMER) ||
	    qp_to_rtr(&p->b, &p->a, b_min_rnr_timer) ||
	    qp_to_rts(&p->a, a_rnr_retry) || qp_to_rts(&p->b, 7))
		return -1;
	return 0;
}

/*
 * Both QPs to RESET and connected again. RESET must drop the QPs' CQEs
 * (each QP has a CQ of its own here), and the pair must carry a message
 * afterwards.
 */
static int reconnect(struct pair *p, uint8_t a_rnr_retry,
		     uint8_t b_min_rnr_timer)
{
	struct ibv_wc wc;
	struct expect e;
	uint64_t id;
	int ret;

	if (qp_to_state(&p->a, IBV_QPS_RESET, "RESET") ||
	    qp_to_state(&p->b, IBV_QPS_RESET, "RESET"))
		return -1;
	/* XRC, after a failed check: receives it left would take messages. */
	if (p->dirty && p->b.type == IBV_QPT_XRC_RECV && xrc_renew(p))
		return annotate("new XRC SRQs");
	ret = side_poll(&p->a, &wc, 1, 0, 0);
	/*
	 * The PVRDMA rule (spec §9) is ours; an XRC SRQ's receive CQEs are
	 * the SRQ's, not the XRC_RECV QP's, and stay (reset_keeps_srq_cqes).
	 */
	if (!ret && (native_peer || p->b.type == IBV_QPT_XRC_RECV))
		drain_cq(&p->b);
	else if (!ret)
		ret = side_poll(&p->b, &wc, 1, 0, 0);
	if (ret < 0)
		return -1;
	if (ret)
		return bad("a CQE (wr_id %" PRIu64 ", status %s) outlived "
			   "RESET", wc.wr_id, ibv_wc_status_str(wc.status));
	if (connect_pair(p, a_rnr_retry, b_min_rnr_timer))
		return -1;

	id = next_wr_id++;
	fill_pattern(p->a.buf + SPARE_OFF, 64, (uint32_t)id);
	if (post_recv_buf(&p->b, id, SPARE_OFF, 64) ||
	    post_send_buf(&p->a, id, SPARE_OFF, 64, 0))
		return -1;
	e = send_ok(&p->a, id, IBV_WC_SEND);
	if (expect_wc(&p->a, &e))
		return -1;
	e = (struct expect){ .wr_id = id, .status = IBV_WC_SUCCESS,
			     .opcode = IBV_WC_RECV, .byte_len = 64,
			     .qp_num = p->b.qpn, .recv = true,
			     .src_qp = p->a.qpn };
	if (expect_wc(&p->b, &e))
		return -1;
	if (expect_bytes(&p->b, SPARE_OFF, p->a.buf + SPARE_OFF, 64,
			 "message after reconnection corrupted"))
		return -1;
	p->dirty = false;
	return 0;
}

/*
 * After a check: if it failed, the pair may hold anything: start it
 * afresh. With -X the next check names the domain's other SRQ.
 */
static void recover(struct pair *p, const char *after)
{
	if (p->dirty) {
		drain_cq(&p->a);
		drain_cq(&p->b);
		report(p, reconnect(p, 7, MIN_RNR_TIMER),
		       "%s: reconnect after %s", p->name, after);
	}
	xrc_turn(p);
}

/* ---- setup --------------------------------------------------------------- */

static bool gid_is_ipv4_mapped(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(gid->raw, prefix, sizeof(prefix));
}

/* The first RoCE v2 IPv4-mapped GID, else index 0. */
static int pick_gid_index(struct dev *d)
{
	struct ibv_gid_entry entry;
	int i;

	for (i = 0; i < d->port_attr.gid_tbl_len; i++) {
		if (ibv_query_gid_ex(d->ctx, PORT, i, &entry, 0))
			continue;
		if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    gid_is_ipv4_mapped((union ibv_gid *)entry.gid.raw))
			return i;
	}
	return 0;
}

static int dev_open(struct dev *d, const char *name, int gid_index)
{
	struct ibv_device **list;
	int n, i;

	d->name = name;
	list = ibv_get_device_list(&n);
	if (!list)
		return bad("ibv_get_device_list: %s", strerror(errno));
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			break;
	if (i == n) {
		ibv_free_device_list(list);
		return bad("no RDMA device named %s", name);
	}
	d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx)
		return bad("%s: ibv_open_device: %s", name, strerror(errno));
	if (ibv_query_device(d->ctx, &d->attr) ||
	    ibv_query_port(d->ctx, PORT, &d->port_attr))
		return bad("%s: cannot query device or port", name);
	if (d->port_attr.state != IBV_PORT_ACTIVE)
		return bad("%s: port %d is not active", name, PORT);
	d->gid_index = gid_index >= 0 ? gid_index : pick_gid_index(d);
	if (ibv_query_gid(d->ctx, PORT, d->gid_index, &d->gid))
		return bad("%s: cannot read GID %d", name, d->gid_index);
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd)
		return bad("%s: ibv_alloc_pd: %s", name, strerror(errno));
	return 0;
}

/* The agent opens its device NAME; d describes it here. */
static int dev_open_remote(struct dev *d, struct agent *ag, const char *name,
			   int gid_index)
{
	static char label[128];
	struct msg *m = req();

	snprintf(label, sizeof(label), "%s@%s", name, ag->host);
	d->name = label;
	d->remote = ag;
	put_str(m, name, 64);
	put_u32(m, gid_index);
	put_u32(m, timeout_ms);
	if (rpc(ag, OP_OPEN, 0) < 0)
		return -1;
	get(&rs, &d->attr, sizeof(d->attr));
	get(&rs, &d->port_attr, sizeof(d->port_attr));
	d->gid_index = (int32_t)get_u32(&rs);
	get(&rs, &d->gid, sizeof(d->gid));
	return rpc_done(ag);
}

static uint32_t max_sge_of(const struct dev *a, const struct dev *b)
{
	int n = a->attr.max_sge < b->attr.max_sge ? a->attr.max_sge :
						      b->attr.max_sge;

	return n < 1 ? 1 : n > MAX_SGE ? MAX_SGE : n;
}

/* A channel for d whose fd never blocks (events are polled for). */
static struct ibv_comp_channel *channel_create(struct dev *d,
					       const char *name)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(d->ctx);
	int flags;

	if (!ch) {
		bad("%s: ibv_create_comp_channel: %s", name, strerror(errno));
		return NULL;
	}
	flags = fcntl(ch->fd, F_GETFL);
	if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK)) {
		bad("%s: channel fd: %s", name, strerror(errno));
		ibv_destroy_comp_channel(ch);
		return NULL;
	}
	return ch;
}

/*
 * The XRC objects of an XRC_RECV side s (ours) on d, its buffer and MR
 * made: two domains, each opened as applications share one, on a file
 * they all open (the first creates the domain, O_CREAT); SRQ 1's PD and
 * the buffer's MR in it; each SRQ's channel and CQ, then the SRQ.
 */
static int xrc_side_create(struct side *s, struct dev *d, uint32_t max_sge)
{
	static unsigned int seq;
	struct xrc *x = calloc(1, sizeof(*x));
	int i, k;

	if (!x)
		return bad("out of memory");
	s->xrc = x;
	x->fd[0] = x->fd[1] = -1;
	x->max_sge = max_sge;
	for (i = 0; i < 2; i++) {
		struct ibv_xrcd_init_attr attr = {
			.comp_mask = IBV_XRCD_INIT_ATTR_FD |
				     IBV_XRCD_INIT_ATTR_OFLAGS,
			.oflags = O_CREAT,
		};

		snprintf(x->path[i], sizeof(x->path[i]),
			 "/tmp/rc_verify-xrcd-%d-%u", (int)getpid(), seq++);
		x->fd[i] = open(x->path[i], O_RDONLY | O_CREAT | O_CLOEXEC,
				0600);
		if (x->fd[i] < 0)
			return bad("%s: %s: %s", s->name, x->path[i],
				   strerror(errno));
		attr.fd = x->fd[i];
		x->xrcd[i] = ibv_open_xrcd(d->ctx, &attr);
		if (!x->xrcd[i])
			return bad("%s: ibv_open_xrcd: %s", s->name,
				   strerror(errno));
	}
	x->pd1 = ibv_alloc_pd(d->ctx);
	if (!x->pd1)
		return bad("%s: ibv_alloc_pd: %s", s->name, strerror(errno));
	x->mr1 = ibv_reg_mr(x->pd1, s->buf, BUF_SIZE, ALL_ACCESS);
	if (!x->mr1)
		return bad("%s: ibv_reg_mr: %s", s->name, strerror(errno));
	for (k = 0; k < XRC_TGTS; k++) {
		struct xrc_tgt *t = &x->tgt[k];

		t->pd = k == 1 ? x->pd1 : d->pd;
		t->mr = k == 1 ? x->mr1 : s->mr;
		s->tk[k].lkey = t->mr->lkey;
		s->tk[k].rkey = t->mr->rkey;
		t->ch = channel_create(d, s->name);
		if (!t->ch)
			return -1;
		t->cq = ibv_create_cq(d->ctx, CQ_DEPTH, s, t->ch, 0);
		if (!t->cq)
			return bad("%s: ibv_create_cq: %s", s->name,
				   strerror(errno));
		if (xrc_srq_create(s, k))
			return -1;
	}
	return 0;
}

static int xrc_side_destroy(struct side *s)
{
	struct xrc *x = s->xrc;
	int i, k, ret = 0;

	for (k = 0; k < XRC_TGTS; k++) {
		struct xrc_tgt *t = &x->tgt[k];

		if (t->srq.srq && ibv_destroy_srq(t->srq.srq))
			ret = bad("%s: ibv_destroy_srq failed", s->name);
		if (t->cq && ibv_destroy_cq(t->cq))
			ret = bad("%s: ibv_destroy_cq failed", s->name);
		if (t->ch && ibv_destroy_comp_channel(t->ch))
			ret = bad("%s: ibv_destroy_comp_channel failed",
				  s->name);
	}
	if (x->mr1 && ibv_dereg_mr(x->mr1))
		ret = bad("%s: ibv_dereg_mr failed", s->name);
	if (x->pd1 && ibv_dealloc_pd(x->pd1))
		ret = bad("%s: ibv_dealloc_pd failed", s->name);
	for (i = 0; i < 2; i++) {
		if (x->xrcd[i] && ibv_close_xrcd(x->xrcd[i]))
			ret = bad("%s: ibv_close_xrcd failed", s->name);
		if (x->fd[i] >= 0) {
			close(x->fd[i]);
			unlink(x->path[i]);
		}
	}
	free(x);
	s->xrc = NULL;
	s->srq = NULL;
	s->cq = NULL;
	s->ch = NULL;
	return ret;
}

/* The opcodes an XRC_SEND QP offers through the extended post API. */
#define XRC_SEND_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
		      IBV_QP_EX_WITH_RDMA_WRITE | \
		      IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		      IBV_QP_EX_WITH_RDMA_READ | \
		      IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
		      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

/*
 * An XRC_SEND QP for s (ours) with init's caps and CQ, offering the
 * extended post API too (with ATOMIC_WRITE where the device has it).
 */
static int xrc_send_qp_create(struct side *s, struct dev *d,
			      struct ibv_qp_init_attr *init)
{
	struct ibv_qp_init_attr_ex attr = {
		.qp_type = IBV_QPT_XRC_SEND,
		.sq_sig_all = init->sq_sig_all,
		.send_cq = init->send_cq,
		.cap = init->cap,
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = d->pd,
		.send_ops_flags = XRC_SEND_OPS,
	};
	struct ibv_device_attr_ex ax;

	if (!ibv_query_device_ex(d->ctx, NULL, &ax) &&
	    ax.device_cap_flags_ex & DEVICE_ATOMIC_WRITE) {
		attr.send_ops_flags |= IBV_QP_EX_WITH_ATOMIC_WRITE;
		s->atomic_write = true;
	}
	s->qp = ibv_create_qp_ex(d->ctx, &attr);
	if (!s->qp)
		return bad("%s: ibv_create_qp_ex (XRC_SEND): %s", s->name,
			   strerror(errno));
	s->qpx = ibv_qp_to_qp_ex(s->qp);
	if (!s->qpx)
		return bad("%s: no extended post API", s->name);
	init->cap = attr.cap;
	return 0;
}

/*
 * One end: an RC QP (on srq if given), an XRC_SEND QP, or an XRC_RECV QP
 * with its XRC SRQs (max_sge is theirs), receiving on SRQ 0.
 */
static int side_create(struct side *s, const char *name, struct dev *d,
		       enum ibv_qp_type type, struct srq *srq, int sq_sig_all,
		       uint32_t max_sge, uint32_t psn)
{
	bool has_rq = type == IBV_QPT_RC && !srq;
	struct ibv_qp_init_attr init = {
		.qp_type = type,
		.sq_sig_all = sq_sig_all,
		.srq = srq ? srq->srq : NULL,
		.cap = {
			.max_send_wr = QP_DEPTH,
			.max_recv_wr = has_rq ? QP_DEPTH : 0,
			.max_send_sge = max_sge,
			.max_recv_sge = has_rq ? max_sge : 0,
		},
	};

	s->name = name;
	s->dev = d;
	s->type = type;
	s->srq = srq;
	s->psn = psn;
	if (!strcmp(name, "requester"))
		init.cap.max_inline_data = INLINE_WANT;
	if (d->remote) {
		struct msg *m = req();

		put_str(m, name, NAME_LEN);
		put_u32(m, type);
		put_u32(m, srq ? srq->id : 0);
		put_u32(m, sq_sig_all);
		put_u32(m, max_sge);
		put_u32(m, psn);
		if (rpc(d->remote, OP_SIDE_CREATE, 0) < 0)
			return -1;
		s->id = get_u32(&rs);
		s->qpn = get_u32(&rs);
		s->lkey = get_u32(&rs);
		s->rkey = get_u32(&rs);
		s->addr = get_u64(&rs);
		get(&rs, &s->cap, sizeof(s->cap));
		get(&rs, s->tk, sizeof(s->tk));
		return rpc_done(d->remote);
	}
	s->pd = d->pd;
	if (type != IBV_QPT_XRC_RECV) {
		s->ch = channel_create(d, name);
		if (!s->ch)
			return -1;
		s->cq = ibv_create_cq(d->ctx, CQ_DEPTH, s, s->ch, 0);
		if (!s->cq)
			return bad("%s: ibv_create_cq: %s", name,
				   strerror(errno));
	}
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->buf)
		return bad("out of memory");
	memset(s->buf, 0, BUF_SIZE);
	s->addr = (uintptr_t)s->buf;
	s->mr = ibv_reg_mr(d->pd, s->buf, BUF_SIZE, ALL_ACCESS);
	if (!s->mr)
		return bad("%s: ibv_reg_mr: %s", name, strerror(errno));
	s->lkey = s->mr->lkey;
	s->rkey = s->mr->rkey;
	if (type == IBV_QPT_XRC_RECV) {
		struct ibv_qp_init_attr_ex attr = {
			.qp_type = IBV_QPT_XRC_RECV,
			.comp_mask = IBV_QP_INIT_ATTR_XRCD,
		};

		if (xrc_side_create(s, d, max_sge))
			return -1;
		attr.xrcd = s->xrc->xrcd[0];
		s->qp = ibv_create_qp_ex(d->ctx, &attr);
		if (!s->qp)
			return bad("%s: ibv_create_qp_ex (XRC_RECV): %s", name,
				   strerror(errno));
		s->qpn = s->qp->qp_num;
		/* Its receive queues are the SRQs. */
		s->cap.max_recv_wr = QP_DEPTH;
		s->cap.max_recv_sge = max_sge;
		return xrc_side_select(s, 0);
	}
	init.send_cq = s->cq;
	init.recv_cq = s->cq;
	if (type == IBV_QPT_XRC_SEND) {
		if (xrc_send_qp_create(s, d, &init))
			return -1;
	} else {
		s->qp = ibv_create_qp(d->pd, &init);
		if (!s->qp)
			return bad("%s: ibv_create_qp: %s", name,
				   strerror(errno));
	}
	s->qpn = s->qp->qp_num;
	s->cap = init.cap;
	if (s->cap.max_send_wr < QP_DEPTH || s->cap.max_send_sge < max_sge ||
	    (has_rq && (s->cap.max_recv_wr < QP_DEPTH ||
			s->cap.max_recv_sge < max_sge)))
		return bad("%s: ibv_create_qp reported smaller caps than "
			   "requested", name);
	return 0;
}

static int side_destroy(struct side *s)
{
	int ret = 0;

	if (remote_of(s)) {
		struct msg *m = req();

		put_u32(m, s->id);
		if (s->id && (rpc(s->dev->remote, OP_SIDE_DESTROY, 0) < 0 ||
			      rpc_done(s->dev->remote)))
			ret = -1;
		memset(s, 0, sizeof(*s));
		return ret;
	}
	if (s->qp && ibv_destroy_qp(s->qp))
		ret = bad("%s: ibv_destroy_qp failed", s->name);
	/* (lends the side its CQ and channel: they go with it) */
	if (s->xrc && xrc_side_destroy(s))
		ret = -1;
	if (s->mr && ibv_dereg_mr(s->mr))
		ret = bad("%s: ibv_dereg_mr failed", s->name);
	if (s->cq && ibv_destroy_cq(s->cq))
		ret = bad("%s: ibv_destroy_cq failed", s->name);
	if (s->ch && ibv_destroy_comp_channel(s->ch))
		ret = bad("%s: ibv_destroy_comp_channel failed", s->name);
	free(s->buf);
	memset(s, 0, sizeof(*s));
	return ret;
}

/*
 * An RC pair (the responder on srq_b if given), or with xrc an XRC_SEND
 * requester and an XRC_RECV responder whose requests name SRQ 0.
 */
static int pair_create(struct pair *p, const char *name, struct dev *da,
		       struct dev *db, struct srq *srq_b, int sq_sig_all,
		       bool xrc)
{
	uint32_t max_sge = max_sge_of(da, db);

	p->name = name;
	if (srq_b) {
		struct ibv_srq_attr sattr;

		if (srq_query(srq_b, &sattr))
			return -1;
		if (sattr.max_sge < max_sge)
			max_sge = sattr.max_sge;
	}
	if (xrc && db->attr.max_srq_sge && (int)max_sge > db->attr.max_srq_sge)
		max_sge = db->attr.max_srq_sge;
	if (side_create(&p->a, "requester", da,
			xrc ? IBV_QPT_XRC_SEND : IBV_QPT_RC, NULL, sq_sig_all,
			max_sge, PSN_A) ||
	    side_create(&p->b, "responder", db,
			xrc ? IBV_QPT_XRC_RECV : IBV_QPT_RC, srq_b, sq_sig_all,
			max_sge, PSN_B))
		return -1;
	return xrc ? xrc_select(p, 0) : 0;
}

/* ---- data transfers ------------------------------------------------------ */

static bool consumes_recv(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
	       op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static bool has_imm(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static int requester_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return IBV_WC_SEND;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	default:
		return -1;
	}
}

static const char *op_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
		return "send";
	case IBV_WR_SEND_WITH_IMM:
		return "send_imm";
	case IBV_WR_RDMA_WRITE:
		return "write";
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return "write_imm";
	case IBV_WR_RDMA_READ:
		return "read";
	default:
		return "?";
	}
}

/*
 * One SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM or RDMA_READ of
 * len bytes from the data source (the requester, or the responder for a
 * read) at DATA_OFF + src_off to the data destination at DATA_OFF +
 * dst_off. The requester's WR has nlocal SGEs (the source, or for a read
 * the destination), a send's receive nrecv; RDMA targets are contiguous.
 * Verifies every byte of the destination window, guards included, and the
 * completions on both sides.
 */
static int transfer(struct pair *p, enum ibv_wr_opcode op, size_t len,
		    size_t src_off, size_t dst_off, int nlocal, int nrecv,
		    unsigned int send_flags)
{
	bool read = op == IBV_WR_RDMA_READ;
	bool send = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
	struct side *src = read ? &p->b : &p->a;
	struct side *dst = read ? &p->a : &p->b;
	struct ibv_sge lsge[MAX_SGE], rsge[MAX_SGE];
	struct ibv_send_wr wr = {};
	struct ibv_recv_wr rwr = {};
	struct pieces ps, pd;
	uint8_t *stream, *image = NULL;
	struct expect e;
	uint64_t id = next_wr_id++;
	uint32_t imm = 0x5eed0000u ^ (uint32_t)id;
	int ret = -1;

	layout(&ps, DATA_OFF + src_off, len, read ? 1 : nlocal);
	layout(&pd, DATA_OFF + dst_off, len,
	       read ? nlocal : send ? nrecv : 1);

	stream = malloc(len);
	if (stream) {
		fill_pattern(stream, len, (uint32_t)id);
		image = window_image(&ps, stream);
	}
	if (!image) {
		free(stream);
		return bad("out of memory");
	}
	if (buf_put(src, ps.lo, image, ps.hi - ps.lo) ||
	    buf_set(dst, pd.lo, CANARY, pd.hi - pd.lo) ||
	    buf_set(&p->b, SPARE_OFF, CANARY, GUARD))
		goto out;

	if (consumes_recv(op)) {
		rwr.wr_id = id;
		rwr.sg_list = rsge;
		if (op == IBV_WR_RDMA_WRITE_WITH_IMM) {
			/* The data goes to the RDMA target, not here. */
			rsge[0].addr = p->b.addr + SPARE_OFF;
			rsge[0].length = GUARD;
			rsge[0].lkey = p->b.lkey;
			rwr.num_sge = 1;
		} else {
			to_sges(&p->b, &pd, rsge);
			rwr.num_sge = pd.n;
		}
		if (post_recv(&p->b, &rwr))
			goto out;
	}

	to_sges(&p->a, read ? &pd : &ps, lsge);
	wr.wr_id = id;
	wr.sg_list = lsge;
	wr.num_sge = read ? pd.n : ps.n;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED | send_flags;
	if (has_imm(op))
		wr.imm_data = htobe32(imm);
	if (!send) {
		struct side *remote = &p->b;
		size_t roff = read ? ps.off[0] : pd.off[0];

		wr.wr.rdma.remote_addr = remote->addr + roff;
		wr.wr.rdma.rkey = remote->rkey;
	}
	if (post_send(&p->a, &wr))
		goto out;

	e = send_ok(&p->a, id, requester_wc_opcode(op));
	if (expect_wc(&p->a, &e))
		goto out;

	if (consumes_recv(op)) {
		e = (struct expect){
			.wr_id = id, .status = IBV_WC_SUCCESS,
			.opcode = op == IBV_WR_RDMA_WRITE_WITH_IMM ?
				IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV,
			.byte_len = len, .qp_num = p->b.qpn,
			.recv = true,
			.wc_flags = has_imm(op) ? IBV_WC_WITH_IMM : 0,
			.imm = imm, .src_qp = p->a.qpn,
		};
		if (expect_wc(&p->b, &e))
			goto out;
	} else {
		/* One-sided operations leave the responder's CQ alone. */
		struct ibv_wc wc;

		ret = side_poll(&p->b, &wc, 1, 0, 0);
		if (ret) {
			if (ret > 0)
				bad("responder: completion (status %s) for a "
				    "one-sided operation",
				    ibv_wc_status_str(wc.status));
			ret = -1;
			goto out;
		}
	}

	ret = verify_window(dst, &pd, stream);
	if (!ret && op == IBV_WR_RDMA_WRITE_WITH_IMM)
		ret = verify_canary(&p->b, SPARE_OFF, GUARD);
out:
	free(image);
	free(stream);
	return ret;
}

static void test_opcodes(struct pair *p)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ,
	};
	static const size_t sizes[] = { 1, 4095, 4096, 65536 };
	static const size_t offs[][2] = { { 0, 0 }, { 13, 29 } };
	size_t o, s, k;

	for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			for (o = 0; o < 2; o++) {
				report(p, transfer(p, ops[k], sizes[s],
						   offs[o][0], offs[o][1], 1,
						   1, 0),
				       "%s: %s len %zu src_off %zu dst_off %zu",
				       p->name, op_name(ops[k]), sizes[s],
				       offs[o][0], offs[o][1]);
				recover(p, op_name(ops[k]));
			}
}

/*
 * Gather and scatter: 1..max SGEs on the source and on the destination.
 * XRC takes 1, half and all of them: its SGEs go the RC paths, an XRC
 * SRQ's are a basic SRQ's, and the time goes to what XRC adds.
 */
static void test_sges(struct pair *p)
{
	bool sample = p->b.type == IBV_QPT_XRC_RECV;
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
	};
	uint32_t max = p->a.cap.max_send_sge;
	uint32_t rmax = p->b.srq || p->b.type == IBV_QPT_XRC_RECV ?
			max : p->b.cap.max_recv_sge;
	uint32_t rdmax = p->a.dev->attr.max_sge_rd ?
			 (uint32_t)p->a.dev->attr.max_sge_rd : max;
	uint32_t n, m;
	size_t k;

	for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		uint32_t lim = ops[k] == IBV_WR_RDMA_READ ?
			       (rdmax < max ? rdmax : max) : max;

		for (n = 1; n <= lim;
		     n = !sample ? n + 1 : n < lim / 2 ? lim / 2 :
			 n < lim ? lim : lim + 1) {
			size_t len = 1000 * n + 77;

			/* n gather SGEs, rmax + 1 - n scatter SGEs */
			m = ops[k] == IBV_WR_SEND && n <= rmax ?
			    rmax + 1 - n : 1;
			report(p, transfer(p, ops[k], len, 5, 11, n, m, 0),
			       "%s: %s len %zu with %u requester SGEs, %u "
			       "receive SGEs", p->name, op_name(ops[k]), len,
			       n, ops[k] == IBV_WR_SEND ? m : 0);
			recover(p, "multi-SGE");
		}
	}
}

/*
 * Atomics on 8 aligned bytes. The values read the same in either byte
 * order, because the byte order of atomic operands in memory belongs to
 * the device (IBV_ATOMIC_HCA), not to this test.
 */
static int atomic_op(struct pair *p, enum ibv_wr_opcode op, uint64_t init,
		     uint64_t compare_add, uint64_t swap, uint64_t want_mem)
{
	const size_t off = SPARE_OFF + 1024;
	uint64_t *local = (uint64_t *)(p->a.buf + off);
	struct ibv_sge sge = { .addr = p->a.addr + off, .length = 8,
			       .lkey = p->a.lkey };
	struct ibv_send_wr wr = {
		.wr_id = next_wr_id++, .sg_list = &sge, .num_sge = 1,
		.opcode = op, .send_flags = IBV_SEND_SIGNALED,
	};
	struct expect e;
	uint64_t remote;

	if (buf_put(&p->b, off, &init, 8))
		return -1;
	memset(local, CANARY, 8);
	wr.wr.atomic.remote_addr = p->b.addr + off;
	wr.wr.atomic.rkey = p->b.rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	if (post_send(&p->a, &wr))
		return -1;
	e = send_ok(&p->a, wr.wr_id, requester_wc_opcode(op));
	if (expect_wc(&p->a, &e))
		return -1;
	if (*local != init)
		return bad("returned %#" PRIx64 ", expected the old value %#"
			   PRIx64, *local, init);
	if (buf_get(&p->b, off, &remote, 8))
		return -1;
	if (remote != want_mem)
		return bad("remote holds %#" PRIx64 ", expected %#" PRIx64,
			   remote, want_mem);
	return expect_quiet_cq(&p->b);
}

static void test_atomics(struct pair *p)
{
	const uint64_t x = 0x0102030404030201ull, y = 0x1111111111111111ull;
	const uint64_t z = 0x2222222222222222ull;

	if (p->a.dev->attr.atomic_cap == IBV_ATOMIC_NONE)
		printf("# %s reports no atomics; they are tested anyway\n",
		       p->a.dev->name);
	report(p, atomic_op(p, IBV_WR_ATOMIC_CMP_AND_SWP, x, x, y, y),
	       "%s: atomic compare-and-swap, equal", p->name);
	recover(p, "atomic");
	report(p, atomic_op(p, IBV_WR_ATOMIC_CMP_AND_SWP, y, z, x, y),
	       "%s: atomic compare-and-swap, different", p->name);
	recover(p, "atomic");
	report(p, atomic_op(p, IBV_WR_ATOMIC_FETCH_AND_ADD,
			    0x0202020202020202ull, 0x0101010101010101ull, 0,
			    0x0303030303030303ull),
	       "%s: atomic fetch-and-add", p->name);
	recover(p, "atomic");
}

/* ---- signaled and unsignaled work ---------------------------------------- */

/* An unsignaled WRITE before a signaled one: one CQE, both writes done. */
static int unsignaled_pair(struct pair *p)
{
	struct ibv_sge sge[2];
	struct ibv_send_wr wr[2] = {};
	struct expect e;
	int i;

	for (i = 0; i < 2; i++) {
		fill_pattern(p->a.buf + DATA_OFF + i * 4096, 4096,
			     (uint32_t)next_wr_id + i);
		if (buf_set(&p->b, DATA_OFF + i * 4096, 0, 4096))
			return -1;
		sge[i] = (struct ibv_sge){
			.addr = p->a.addr + DATA_OFF + i * 4096,
			.length = 4096, .lkey = p->a.lkey };
		wr[i].wr_id = next_wr_id++;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].wr.rdma.remote_addr = p->b.addr + DATA_OFF + i * 4096;
		wr[i].wr.rdma.rkey = p->b.rkey;
	}
	wr[0].next = &wr[1];
	wr[1].send_flags = IBV_SEND_SIGNALED;
	if (post_send(&p->a, wr))
		return -1;
	e = send_ok(&p->a, wr[1].wr_id, IBV_WC_RDMA_WRITE);
	if (expect_wc(&p->a, &e))
		return -1;
	if (expect_bytes(&p->b, DATA_OFF, p->a.buf + DATA_OFF, 8192,
			 "written data differ"))
		return -1;
	return expect_quiet_cq(&p->a);
}

/*
 * The perftest pattern: 4 x the SQ depth of WRITEs, every 16th signaled,
 * never more outstanding than the SQ holds. Only the signaled WRs
 * complete, and the SQ ring wraps several times.
 */
static int unsignaled_stream(struct pair *p)
{
	const uint32_t depth = p->a.cap.max_send_wr, total = 4 * depth;
	const uint64_t base_id = next_wr_id;
	uint32_t posted = 0, retired = 0;
	struct ibv_send_wr wr = {};
	struct ibv_sge sge;
	struct ibv_wc wc;

	next_wr_id += total;
	fill_pattern(p->a.buf + DATA_OFF, 32 * 64, (uint32_t)base_id);
	if (buf_set(&p->b, DATA_OFF, 0, 32 * 64))
		return -1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.rkey = p->b.rkey;

	while (retired < total) {
		if (posted < total && posted - retired < depth) {
			size_t off = DATA_OFF + (posted % 32) * 64;

			sge = (struct ibv_sge){
				.addr = p->a.addr + off,
				.length = 64, .lkey = p->a.lkey };
			wr.wr_id = base_id + posted;
			wr.wr.rdma.remote_addr = p->b.addr + off;
			wr.send_flags = (posted % 16 == 15 ||
					 posted == total - 1) ?
					IBV_SEND_SIGNALED : 0;
			if (post_send(&p->a, &wr))
				return -1;
			posted++;
			continue;
		}
		if (poll_n(&p->a, &wc, 1))
			return -1;
		if (wc.status != IBV_WC_SUCCESS)
			return bad("status %s", ibv_wc_status_str(wc.status));
		if (wc.wr_id < base_id + retired ||
		    wc.wr_id >= base_id + posted ||
		    ((wc.wr_id - base_id) % 16 != 15 &&
		     wc.wr_id - base_id != total - 1))
			return bad("completion for wr_id %" PRIu64
				   ", which was not signaled or not next",
				   wc.wr_id);
		retired = wc.wr_id - base_id + 1;
	}
	if (expect_bytes(&p->b, DATA_OFF, p->a.buf + DATA_OFF, 32 * 64,
			 "written data differ"))
		return -1;
	return expect_quiet_cq(&p->a);
}

/* With sq_sig_all, a WR without IBV_SEND_SIGNALED completes too. */
static int sig_all(struct pair *p)
{
	struct ibv_sge sge = { .addr = p->a.addr + DATA_OFF,
			       .length = 64, .lkey = p->a.lkey };
	struct ibv_send_wr wr = {
		.wr_id = next_wr_id++, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
	};
	struct expect e;

	wr.wr.rdma.remote_addr = p->b.addr + DATA_OFF;
	wr.wr.rdma.rkey = p->b.rkey;
	if (post_send(&p->a, &wr))
		return -1;
	e = send_ok(&p->a, wr.wr_id, IBV_WC_RDMA_WRITE);
	return expect_wc(&p->a, &e);
}

/* ---- completion channels ------------------------------------------------- */

static int send_and_receive(struct pair *p, unsigned int flags)
{
	uint64_t id = next_wr_id++;
	struct expect e;

	if (post_recv_buf(&p->b, id, SPARE_OFF, 64) ||
	    post_send_buf(&p->a, id, SPARE_OFF, 64, flags))
		return -1;
	e = send_ok(&p->a, id, IBV_WC_SEND);
	return expect_wc(&p->a, &e);
}

static struct expect recv_ok(const struct pair *p, uint64_t id)
{
	return (struct expect){ .wr_id = id, .status = IBV_WC_SUCCESS,
				.opcode = IBV_WC_RECV, .byte_len = 64,
				.qp_num = p->b.qpn, .recv = true,
				.src_qp = p->a.qpn };
}

/* Armed for any completion: a receive raises an event. */
static int event_next(struct pair *p)
{
	struct expect e;

	if (side_notify(&p->b, 0))
		return -1;
	if (send_and_receive(p, 0) || expect_cq_event(&p->b))
		return -1;
	e = recv_ok(p, next_wr_id - 1);
	return expect_wc(&p->b, &e);
}

/* Armed for solicited completions: a plain send does not wake, a solicited
 * one does. */
static int event_solicited(struct pair *p)
{
	struct expect e;

	if (side_notify(&p->b, 1))
		return -1;
	if (send_and_receive(p, 0))
		return -1;
	e = recv_ok(p, next_wr_id - 1);
	if (expect_wc(&p->b, &e) || expect_no_cq_event(&p->b))
		return -1;
	if (send_and_receive(p, IBV_SEND_SOLICITED) ||
	    expect_cq_event(&p->b))
		return -1;
	e = recv_ok(p, next_wr_id - 1);
	return expect_wc(&p->b, &e);
}

/* The send side's CQ raises events as well; without arming, none. */
static int event_send_cq(struct pair *p)
{
	struct ibv_wc wc;

	if (side_notify(&p->a, 0))
		return -1;
	if (send_and_receive(p, 0) || expect_cq_event(&p->a))
		return -1;
	if (poll_n(&p->b, &wc, 1))
		return -1;
	/* Not re-armed: the next completion must stay silent. */
	if (send_and_receive(p, 0) || expect_no_cq_event(&p->a))
		return -1;
	return poll_n(&p->b, &wc, 1);
}

/* CQEs still in the ring when a QP is reset are gone afterwards. */
static int reset_drops_cqes(struct pair *p)
{
	if (side_notify(&p->a, 0))
		return -1;
	if (post_recv_buf(&p->b, next_wr_id, SPARE_OFF, 64) ||
	    post_send_buf(&p->a, next_wr_id, SPARE_OFF, 64, 0))
		return -1;
	next_wr_id++;
	/* The event says the CQE is there; nobody polls it. */
	if (expect_cq_event(&p->a))
		return -1;
	return reconnect(p, 7, MIN_RNR_TIMER);
}

/*
 * XRC: RESET drops the XRC_SEND QP's unpolled CQEs, but a receive CQE of
 * an XRC SRQ is the SRQ's (on its CQ, for any process of the domain),
 * not the XRC_RECV QP's: it outlives the QP's RESET.
 */
static int reset_keeps_srq_cqes(struct pair *p)
{
	uint64_t id = next_wr_id++;
	struct ibv_wc wc;
	struct expect e;
	int ret;

	if (side_notify(&p->a, 0))
		return -1;
	fill_pattern(p->a.buf + SPARE_OFF, 64, (uint32_t)id);
	if (buf_set(&p->b, SPARE_OFF, 0, 64) ||
	    post_recv_buf(&p->b, id, SPARE_OFF, 64) ||
	    post_send_buf(&p->a, id, SPARE_OFF, 64, 0))
		return -1;
	/* The event says the CQE is there; nobody polls it. */
	if (expect_cq_event(&p->a))
		return -1;
	if (qp_to_state(&p->a, IBV_QPS_RESET, "RESET") ||
	    qp_to_state(&p->b, IBV_QPS_RESET, "RESET"))
		return -1;
	ret = side_poll(&p->a, &wc, 1, 0, 0);
	if (ret < 0)
		return -1;
	if (ret)
		return bad("requester: a CQE (wr_id %" PRIu64 ", status %s) "
			   "outlived RESET", wc.wr_id,
			   ibv_wc_status_str(wc.status));
	e = recv_ok(p, id);
	if (expect_wc(&p->b, &e))
		return annotate("the SRQ's receive CQE after RESET");
	if (expect_bytes(&p->b, SPARE_OFF, p->a.buf + SPARE_OFF, 64,
			 "received data differ") ||
	    expect_no_cqe(&p->b))
		return -1;
	return reconnect(p, 7, MIN_RNR_TIMER);
}

/* ---- work requests the provider must refuse ------------------------------ */

static int expect_send_rejected(struct side *s, struct ibv_send_wr *wr,
				struct ibv_send_wr *want_bad)
{
	struct ibv_send_wr *bad_wr = NULL;
	int ret;

	name_srq(s, wr);
	if (side_post_send(s, wr, &bad_wr, &ret))
		return -1;
	if (ret != EINVAL)
		return bad("ibv_post_send returned %d (%s), expected EINVAL",
			   ret, strerror(ret));
	if (bad_wr != want_bad)
		return bad("ibv_post_send returned EINVAL but bad_wr does not "
			   "point at the offending WR");
	return 0;
}

static int reject_state(struct side *s, const char *state)
{
	struct ibv_sge sge = { .addr = s->addr, .length = 8,
			       .lkey = s->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };

	if (expect_send_rejected(s, &wr, &wr))
		return annotate(state);
	return 0;
}

/* ibv_post_recv on s's QP (what) must fail with EINVAL, naming the WR. */
static int expect_recv_rejected(struct side *s, const char *what)
{
	struct ibv_sge sge = { .addr = s->addr, .length = 8,
			       .lkey = s->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad_wr = NULL;
	int ret;

	if (side_post_recv(s, &wr, &bad_wr, true, &ret))
		return -1;
	if (ret != EINVAL || bad_wr != &wr)
		return bad("%s returned %d, bad_wr %s", what, ret,
			   bad_wr == &wr ? "set" : "not set");
	return 0;
}

static int reject_recv_in_reset(struct side *s)
{
	return expect_recv_rejected(s, "ibv_post_recv in RESET");
}

static int query_caps(struct side *s, enum ibv_qp_state state)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	if (side_query_qp(s, &attr, IBV_QP_STATE | IBV_QP_CAP, &init))
		return -1;
	if (attr.qp_state != state)
		return bad("state %d, expected %d", attr.qp_state, state);
	/* Both report the actual caps; only more is allowed for rings. */
	if (attr.cap.max_send_wr < s->cap.max_send_wr ||
	    attr.cap.max_send_sge < s->cap.max_send_sge ||
	    attr.cap.max_recv_wr < s->cap.max_recv_wr ||
	    attr.cap.max_inline_data != s->cap.max_inline_data)
		return bad("caps %u/%u/%u/%u do not match ibv_create_qp's "
			   "%u/%u/%u/%u", attr.cap.max_send_wr,
			   attr.cap.max_send_sge, attr.cap.max_recv_wr,
			   attr.cap.max_inline_data, s->cap.max_send_wr,
			   s->cap.max_send_sge, s->cap.max_recv_wr,
			   s->cap.max_inline_data);
	return 0;
}

/*
 * Before RTS, the send queue refuses work; the receive queue in RESET.
 * XRC QPs have no receive queue, an XRC_RECV QP no send queue either.
 */
static void test_unconnected(struct pair *p)
{
	if (p->b.type == IBV_QPT_XRC_RECV) {
		report(p, expect_recv_rejected(&p->a, "ibv_post_recv"),
		       "%s: post_recv on the XRC_SEND QP is refused (EINVAL)",
		       p->name);
		report(p, expect_recv_rejected(&p->b, "ibv_post_recv"),
		       "%s: post_recv on the XRC_RECV QP is refused (EINVAL)",
		       p->name);
		report(p, reject_state(&p->b, "XRC_RECV"), "%s: post_send on "
		       "the XRC_RECV QP is refused (EINVAL)", p->name);
	} else {
		report(p, reject_recv_in_reset(native_peer ? &p->a : &p->b),
		       "%s: post_recv in RESET is refused", p->name);
	}
	report(p, reject_state(&p->a, "RESET"), "%s: post_send in RESET is "
	       "refused", p->name);
	report(p, query_caps(&p->a, IBV_QPS_RESET), "%s: query_qp in RESET",
	       p->name);
	report(p, qp_to_init(&p->a) || reject_state(&p->a, "INIT"),
	       "%s: post_send in INIT is refused", p->name);
	report(p, qp_to_init(&p->b) || qp_to_rtr(&p->a, &p->b, MIN_RNR_TIMER) ||
	       reject_state(&p->a, "RTR"),
	       "%s: post_send in RTR is refused", p->name);
	report(p, qp_to_state(&p->a, IBV_QPS_RESET, "RESET") ||
	       qp_to_state(&p->b, IBV_QPS_RESET, "RESET"),
	       "%s: back to RESET", p->name);
}

static int reject_inline(struct pair *p)
{
	struct ibv_sge sge = { .addr = p->a.addr,
			       .length = p->a.cap.max_inline_data + 1,
			       .lkey = p->a.lkey };
	struct ibv_send_wr wr = {
		.wr_id = next_wr_id++, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
	};

	if (p->a.cap.max_inline_data < INLINE_WANT)
		return bad("QP reports %u bytes of inline data; asked for %u",
			   p->a.cap.max_inline_data, INLINE_WANT);
	if (expect_send_rejected(&p->a, &wr, &wr))
		return -1;
	return expect_quiet_cq(&p->a);
}

/*
 * Inline SEND and RDMA WRITE up to max_inline_data, in one and in three
 * SGEs: every byte arrives (transfer() compares them).
 */
static void test_inline(struct pair *p)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
	};
	size_t sizes[] = { 1, 33, p->a.cap.max_inline_data };
	size_t k, s;
	int n;

	for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			for (n = 1; n <= 3; n += 2) {
				if ((size_t)n > sizes[s])
					continue;
				report(p, transfer(p, ops[k], sizes[s], 0, 0,
						   n, 1, IBV_SEND_INLINE),
				       "%s: inline %s len %zu in %d SGE%s",
				       p->name, op_name(ops[k]), sizes[s], n,
				       n > 1 ? "s" : "");
				recover(p, op_name(ops[k]));
			}
}

static int reject_too_many_sges(struct pair *p)
{
	struct ibv_sge sge[MAX_SGE + 1];
	struct ibv_send_wr wr = {
		.wr_id = next_wr_id++, .sg_list = sge,
		.num_sge = p->a.cap.max_send_sge + 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	int i;

	if (wr.num_sge > MAX_SGE + 1)
		return bad("QP has %u SGEs, more than this test handles",
			   p->a.cap.max_send_sge);
	for (i = 0; i < wr.num_sge; i++)
		sge[i] = (struct ibv_sge){ .addr = p->a.addr, .length = 1,
					   .lkey = p->a.lkey };
	if (expect_send_rejected(&p->a, &wr, &wr))
		return -1;
	return expect_quiet_cq(&p->a);
}

/* The WRs before a refused one are posted and complete. */
static int reject_bad_opcode_in_chain(struct pair *p)
{
	struct ibv_sge sge = { .addr = p->a.addr + SPARE_OFF,
			       .length = 64, .lkey = p->a.lkey };
	struct ibv_send_wr wr[2] = {
		{ .wr_id = next_wr_id, .sg_list = &sge, .num_sge = 1,
		  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
		{ .wr_id = next_wr_id + 1, .sg_list = &sge, .num_sge = 1,
		  .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED },
	};
	struct expect e;

	next_wr_id += 2;
	wr[0].next = &wr[1];
	if (post_recv_buf(&p->b, wr[0].wr_id, SPARE_OFF, 64) ||
	    expect_send_rejected(&p->a, wr, &wr[1]))
		return -1;
	e = send_ok(&p->a, wr[0].wr_id, IBV_WC_SEND);
	if (expect_wc(&p->a, &e))
		return -1;
	e = recv_ok(p, wr[0].wr_id);
	if (expect_wc(&p->b, &e))
		return -1;
	return expect_quiet_cq(&p->a);
}

static void test_rejections(struct pair *p)
{
	report(p, reject_inline(p), "%s: inline data beyond max_inline_data "
	       "is refused (EINVAL)", p->name);
	report(p, reject_too_many_sges(p), "%s: num_sge above max_send_sge "
	       "is refused (EINVAL)", p->name);
	report(p, reject_bad_opcode_in_chain(p), "%s: BIND_MW is refused, "
	       "the WR before it is posted", p->name);
	recover(p, "refused WRs");
}

/* ---- error completions --------------------------------------------------- */

/* The keys of an MR over s's buffer that no longer exists. */
static int stale_key(struct side *s, uint32_t *lkey, uint32_t *rkey)
{
	struct mr mr;

	if (mr_reg(&mr, s, SPARE_OFF, 4096, ALL_ACCESS))
		return -1;
	*lkey = mr.lkey;
	*rkey = mr.rkey;
	if (mr_dereg(&mr))
		return -1;
	if (*lkey == s->lkey || *rkey == s->rkey)
		return bad("a deregistered MR's key equals a live one");
	return 0;
}

/* A SEND whose SGE the requester cannot use. */
static int loc_prot_err(struct pair *p, bool stale)
{
	uint32_t lkey = p->a.lkey, rkey;
	uint64_t addr = p->a.addr + SPARE_OFF;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .wr_id = next_wr_id++, .sg_list = &sge,
				  .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct expect e;

	if (stale) {
		if (stale_key(&p->a, &lkey, &rkey))
			return -1;
	} else {
		/* The SGE runs 32 bytes past the end of the MR. */
		addr = p->a.addr + BUF_SIZE - 32;
	}
	sge = (struct ibv_sge){ .addr = addr, .length = 64, .lkey = lkey };
	/* An XRC SRQ's receive would outlive the reset that follows. */
	if ((p->b.type != IBV_QPT_XRC_RECV &&
	     post_recv_buf(&p->b, next_wr_id++, SPARE_OFF, 64)) ||
	    post_send(&p->a, &wr))
		return -1;
	e = wc_error(&p->a, wr.wr_id, IBV_WC_LOC_PROT_ERR);
	return expect_wc(&p->a, &e);
}

/* An RDMA access the responder must refuse. */
static int rem_access_err(struct pair *p, enum ibv_wr_opcode op,
			  int mr_access, bool stale)
{
	struct ibv_sge sge = { .addr = p->a.addr + DATA_OFF,
			       .length = 64, .lkey = p->a.lkey };
	struct ibv_send_wr wr = { .wr_id = next_wr_id++, .sg_list = &sge,
				  .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED };
	const size_t target = SPARE_OFF + 2048;
	struct mr mr = {};
	uint32_t lkey, rkey;
	struct expect e;
	int ret = -1;

	if (stale) {
		if (stale_key(&p->b, &lkey, &rkey))
			return -1;
	} else {
		if (mr_reg(&mr, &p->b, target, 64, mr_access))
			return -1;
		rkey = mr.rkey;
	}
	if (buf_set(&p->b, target, CANARY, 64))
		goto out;
	memset(p->a.buf + DATA_OFF, 0x3c, 64);
	wr.wr.rdma.remote_addr = p->b.addr + target;
	wr.wr.rdma.rkey = rkey;
	if (post_send(&p->a, &wr))
		goto out;
	e = wc_error(&p->a, wr.wr_id, IBV_WC_REM_ACCESS_ERR);
	if (expect_wc(&p->a, &e))
		goto out;
	ret = verify_canary(&p->b, target, 64);
	if (!ret && op == IBV_WR_RDMA_READ) {
		size_t i;

		for (i = 0; i < 64 && !ret; i++)
			if (p->a.buf[DATA_OFF + i] != 0x3c)
				ret = bad("refused READ wrote local memory");
	}
out:
	if (mr.side && ret) {
		char first[sizeof(why)];

		/* The first failure is the one to report. */
		memcpy(first, why, sizeof(why));
		mr_dereg(&mr);
		memcpy(why, first, sizeof(why));
	} else if (mr.side) {
		ret = mr_dereg(&mr);
	}
	return ret;
}

/* A SEND larger than the receive buffer: both sides see an error. */
static int too_long_send(struct pair *p)
{
	uint64_t rid = next_wr_id++, sid = next_wr_id++;
	struct expect e;

	if (post_recv_buf(&p->b, rid, SPARE_OFF, 16) ||
	    post_send_buf(&p->a, sid, SPARE_OFF, 64, 0))
		return -1;
	/*
	 * IBA: the responder's length error is an Invalid Request NAK and a
	 * local length error there; Soft-RoCE gives Remote Operational
	 * Error and a local QP operation error instead.
	 */
	e = wc_error(&p->a, sid, IBV_WC_REM_INV_REQ_ERR);
	if (native_peer)
		e.alt_status = IBV_WC_REM_OP_ERR;
	if (expect_wc(&p->a, &e))
		return -1;
	e = wc_error(&p->b, rid, IBV_WC_LOC_LEN_ERR);
	if (native_peer)
		e.alt_status = IBV_WC_LOC_QP_OP_ERR;
	return expect_wc(&p->b, &e);
}

/* No receive and no RNR retries. */
static int rnr_err(struct pair *p)
{
	uint64_t id = next_wr_id++;
	struct expect e;

	if (reconnect(p, 0, 1))
		return annotate("setting up rnr_retry 0");
	if (post_send_buf(&p->a, id, SPARE_OFF, 64, 0))
		return -1;
	e = wc_error(&p->a, id, IBV_WC_RNR_RETRY_EXC_ERR);
	return expect_wc(&p->a, &e);
}

/* Posted receives flush when the QP enters ERR, and so do later sends. */
static int flush_recv(struct pair *p)
{
	uint64_t base = next_wr_id;
	struct expect e;
	int i;

	next_wr_id += 5;
	for (i = 0; i < 4; i++)
		if (post_recv_buf(&p->b, base + i, SPARE_OFF, 64))
			return -1;
	if (qp_to_state(&p->b, IBV_QPS_ERR, "ERR"))
		return -1;
	for (i = 0; i < 4; i++) {
		e = wc_error(&p->b, base + i, IBV_WC_WR_FLUSH_ERR);
		if (expect_wc(&p->b, &e))
			return -1;
	}
	/* IBA: a QP in ERR takes send WRs and flushes them. */
	if (post_send_buf(&p->b, base + 4, SPARE_OFF, 64, 0))
		return -1;
	e = wc_error(&p->b, base + 4, IBV_WC_WR_FLUSH_ERR);
	return expect_wc(&p->b, &e);
}

/*
 * XRC: receives wait in the SRQ, not in the XRC_RECV QP, so its ERR
 * (and RESET) flushes none of them; once reconnected, the next messages
 * take them in the order they were posted.
 */
static int srq_outlives_qp_err(struct pair *p)
{
	uint64_t base = next_wr_id;
	struct expect e;
	int i;

	next_wr_id += 2;
	fill_pattern(p->a.buf + SPARE_OFF + 2048, 2 * 256, (uint32_t)base);
	if (buf_set(&p->b, SPARE_OFF, 0, 2 * 256))
		return -1;
	for (i = 0; i < 2; i++)
		if (post_recv_buf(&p->b, base + i, SPARE_OFF + i * 256, 64))
			return -1;
	/* (a receive flushed would complete in error below) */
	if (qp_to_state(&p->b, IBV_QPS_ERR, "ERR"))
		return -1;
	if (expect_no_cqe(&p->b))
		return annotate("the XRC_RECV QP's ERR flushed the SRQ");
	if (qp_to_state(&p->a, IBV_QPS_RESET, "RESET") ||
	    qp_to_state(&p->b, IBV_QPS_RESET, "RESET") ||
	    connect_pair(p, 7, MIN_RNR_TIMER))
		return -1;
	for (i = 0; i < 2; i++) {
		if (post_send_buf(&p->a, base + i, SPARE_OFF + 2048 + i * 256,
				  64, 0))
			return -1;
		e = send_ok(&p->a, base + i, IBV_WC_SEND);
		if (expect_wc(&p->a, &e))
			return -1;
	}
	for (i = 0; i < 2; i++) {
		e = recv_ok(p, base + i);
		if (expect_wc(&p->b, &e) ||
		    expect_bytes(&p->b, SPARE_OFF + i * 256,
				 p->a.buf + SPARE_OFF + 2048 + i * 256, 64,
				 "a receive kept over ERR got other data"))
			return -1;
	}
	return expect_no_cqe(&p->b);
}

/* Sends stuck in RNR retries (the responder has no receive) flush too. */
static int flush_send(struct pair *p)
{
	uint64_t base = next_wr_id;
	struct expect e;
	int i;

	next_wr_id += 2;
	for (i = 0; i < 2; i++)
		if (post_send_buf(&p->a, base + i, SPARE_OFF, 64, 0))
			return -1;
	if (expect_quiet_cq(&p->a))
		return annotate("a send without a receive completed");
	if (qp_to_state(&p->a, IBV_QPS_ERR, "ERR"))
		return -1;
	for (i = 0; i < 2; i++) {
		e = wc_error(&p->a, base + i, IBV_WC_WR_FLUSH_ERR);
		if (expect_wc(&p->a, &e))
			return -1;
	}
	return 0;
}

/*
 * Run an error case, then reset and reconnect the pair; with -X the next
 * check names the domain's other SRQ.
 */
static void error_case(struct pair *p, int ret, const char *name)
{
	report(p, ret, "%s: %s", p->name, name);
	drain_cq(&p->a);
	drain_cq(&p->b);
	report(p, reconnect(p, 7, MIN_RNR_TIMER), "%s: reconnect after %s",
	       p->name, name);
	xrc_turn(p);
}

/* Finite retries run on the device's timer: 3 retries of 10.24 ms. */
static int rnr_timer_exhausted(struct pair *p)
{
	uint64_t id = next_wr_id++;
	long long start, took;
	struct expect e;

	if (reconnect(p, 3, RNR_TIMER_10MS))
		return annotate("setting up rnr_retry 3");
	start = now_ms();
	if (post_send_buf(&p->a, id, SPARE_OFF, 64, 0))
		return -1;
	e = wc_error(&p->a, id, IBV_WC_RNR_RETRY_EXC_ERR);
	if (expect_wc(&p->a, &e))
		return -1;
	took = now_ms() - start;
	printf("measured: RNR_RETRY_EXC_ERR after %lld ms (3 x 10.24 ms)\n",
	       took);
	if (took < 30)
		return bad("retries exhausted after %lld ms, before 3 timer "
			   "periods", took);
	return 0;
}

/*
 * A send that meets no receive waits (RNR) and completes once a receive
 * is posted: with infinite retries, and within a finite retry window.
 */
static int rnr_then_receive(struct pair *p, uint8_t rnr_retry,
			    uint8_t timer)
{
	uint64_t id = next_wr_id++;
	struct expect e;

	if (reconnect(p, rnr_retry, timer))
		return annotate("setting up the RNR case");
	fill_pattern(p->a.buf + SPARE_OFF, 64, (uint32_t)id);
	if (buf_set(&p->b, SPARE_OFF, 0, 64))
		return -1;
	if (post_send_buf(&p->a, id, SPARE_OFF, 64, 0))
		return -1;
	sleep_us(15000);
	if (expect_quiet_cq(&p->a))
		return annotate("the send completed without a receive");
	if (post_recv_buf(&p->b, id, SPARE_OFF, 64))
		return -1;
	e = send_ok(&p->a, id, IBV_WC_SEND);
	if (expect_wc(&p->a, &e))
		return -1;
	e = (struct expect){ .wr_id = id, .status = IBV_WC_SUCCESS,
			     .opcode = IBV_WC_RECV, .byte_len = 64,
			     .qp_num = p->b.qpn, .recv = true,
			     .src_qp = p->a.qpn };
	if (expect_wc(&p->b, &e))
		return -1;
	return expect_bytes(&p->b, SPARE_OFF, p->a.buf + SPARE_OFF, 64,
			    "data sent after RNR corrupted");
}

/*
 * Requests in flight behind an RNR NAK: one chain of three 64-byte SENDs
 * and a WRITE, one receive posted.  The first SEND completes; the second
 * waits for a receive, and the SEND and WRITE behind it wait with it (the
 * WRITE's bytes do not land before it); once receives are posted all
 * complete, in order, each message received once.
 */
static int rnr_in_window(struct pair *p)
{
	const size_t wtarget = SPARE_OFF + 4096;
	struct ibv_sge sge[4];
	struct ibv_send_wr wr[4];
	uint64_t base = next_wr_id;
	struct expect e;
	int i;

	next_wr_id += 4;
	if (reconnect(p, 7, RNR_TIMER_1MS))
		return annotate("setting up the RNR case");
	fill_pattern(p->a.buf + SPARE_OFF, 4 * 256, (uint32_t)base);
	if (buf_set(&p->b, SPARE_OFF, 0, 3 * 256) ||
	    buf_set(&p->b, wtarget, CANARY, 256))
		return -1;
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 4; i++) {
		sge[i] = (struct ibv_sge){ .addr = p->a.addr + SPARE_OFF + i * 256,
					   .length = 64, .lkey = p->a.lkey };
		wr[i] = (struct ibv_send_wr){ .wr_id = base + i,
					      .sg_list = &sge[i], .num_sge = 1,
					      .opcode = IBV_WR_SEND,
					      .send_flags = IBV_SEND_SIGNALED,
					      .next = i < 3 ? &wr[i + 1] : NULL };
	}
	wr[3].opcode = IBV_WR_RDMA_WRITE;
	wr[3].wr.rdma.remote_addr = p->b.addr + wtarget;
	wr[3].wr.rdma.rkey = p->b.rkey;
	if (post_recv_buf(&p->b, base, SPARE_OFF, 64) || post_send(&p->a, wr))
		return -1;
	e = send_ok(&p->a, base, IBV_WC_SEND);
	if (expect_wc(&p->a, &e))
		return -1;
	sleep_us(15000);
	if (expect_quiet_cq(&p->a))
		return annotate("a send without a receive completed");
	if (verify_canary(&p->b, wtarget, 256))
		return annotate("a WRITE behind an RNR-NAKed SEND landed first");
	for (i = 1; i < 3; i++)
		if (post_recv_buf(&p->b, base + i, SPARE_OFF + i * 256, 64))
			return -1;
	for (i = 1; i < 4; i++) {
		e = send_ok(&p->a, base + i, i < 3 ? IBV_WC_SEND :
						     IBV_WC_RDMA_WRITE);
		if (expect_wc(&p->a, &e))
			return -1;
	}
	for (i = 0; i < 3; i++) {
		e = (struct expect){ .wr_id = base + i, .status = IBV_WC_SUCCESS,
				     .opcode = IBV_WC_RECV, .byte_len = 64,
				     .qp_num = p->b.qpn, .recv = true,
				     .src_qp = p->a.qpn };
		if (expect_wc(&p->b, &e) ||
		    expect_bytes(&p->b, SPARE_OFF + i * 256,
				 p->a.buf + SPARE_OFF + i * 256, 64,
				 "a SEND after RNR corrupted"))
			return -1;
	}
	if (expect_quiet_cq(&p->b))
		return annotate("a message was received twice");
	return expect_bytes(&p->b, wtarget, p->a.buf + SPARE_OFF + 3 * 256, 64,
			    "the WRITE behind the RNR corrupted");
}

/*
 * Requests in flight behind an error: four WRITEs in one chain, the
 * second with a bad rkey.  The first completes, the second with
 * REM_ACCESS_ERR, the others are flushed and none of their bytes land.
 */
static int error_in_window(struct pair *p)
{
	const size_t target = SPARE_OFF + 2048;
	struct ibv_sge sge[4];
	struct ibv_send_wr wr[4];
	uint64_t base = next_wr_id;
	uint32_t lkey, rkey;
	struct expect e;
	int i;

	next_wr_id += 4;
	if (stale_key(&p->b, &lkey, &rkey))
		return -1;
	fill_pattern(p->a.buf + SPARE_OFF, 4 * 256, (uint32_t)base);
	if (buf_set(&p->b, target, CANARY, 4 * 256))
		return -1;
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 4; i++) {
		sge[i] = (struct ibv_sge){ .addr = p->a.addr + SPARE_OFF + i * 256,
					   .length = 256, .lkey = p->a.lkey };
		wr[i] = (struct ibv_send_wr){ .wr_id = base + i,
					      .sg_list = &sge[i], .num_sge = 1,
					      .opcode = IBV_WR_RDMA_WRITE,
					      .send_flags = IBV_SEND_SIGNALED,
					      .next = i < 3 ? &wr[i + 1] : NULL };
		wr[i].wr.rdma.remote_addr = p->b.addr + target + i * 256;
		wr[i].wr.rdma.rkey = i == 1 ? rkey : p->b.rkey;
	}
	if (post_send(&p->a, wr))
		return -1;
	e = send_ok(&p->a, base, IBV_WC_RDMA_WRITE);
	if (expect_wc(&p->a, &e))
		return -1;
	e = wc_error(&p->a, base + 1, IBV_WC_REM_ACCESS_ERR);
	if (expect_wc(&p->a, &e))
		return -1;
	for (i = 2; i < 4; i++) {
		e = wc_error(&p->a, base + i, IBV_WC_WR_FLUSH_ERR);
		if (expect_wc(&p->a, &e))
			return -1;
	}
	if (expect_bytes(&p->b, target, p->a.buf + SPARE_OFF, 256,
			 "the WRITE before the error"))
		return -1;
	return verify_canary(&p->b, target + 256, 3 * 256);
}

/* ---- the fast path costs nothing when idle ------------------------------ */

struct idle_poll {
	struct ibv_cq *cq[2];
	int ncq;
	int polls;
	int found;
};

/*
 * Runs in a thread under seccomp strict mode (only read, write, exit and
 * sigreturn allowed: anything else kills the process) while every UAR
 * page of the process is PROT_NONE (a doorbell store faults), unless the
 * device asks for CQ_POLL doorbells on empty polls (-P).
 */
static void *idle_poll_thread(void *arg)
{
	struct idle_poll *ip = arg;
	struct ibv_wc wc;
	int i, j;

	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT))
		return (void *)1;
	for (i = 0; i < ip->polls; i++)
		for (j = 0; j < ip->ncq; j++)
			ip->found += ibv_poll_cq(ip->cq[j], 1, &wc);
	/* Raw exit: glibc's thread exit makes syscalls strict mode forbids. */
	syscall(SYS_exit, 0);
	return NULL;
}

/* mprotect every uverbs mapping of one page (the UARs) to @prot. */
static int protect_uars(int prot)
{
	char line[512];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (!strstr(line, "/dev/infiniband/uverbs") ||
		    sscanf(line, "%lx-%lx", &lo, &hi) != 2 || hi - lo != 4096)
			continue;
		if (mprotect((void *)lo, hi - lo, prot)) {
			fclose(f);
			return -1;
		}
		n++;
	}
	fclose(f);
	return n;
}

/*
 * Empty polls of this process's CQs (at most 2) cost no syscall and, but
 * with @doorbells (a device with peers in other processes asks for CQ_POLL
 * doorbells on empty polls, docs/abi.md §14), no doorbell; what was
 * measured goes to note.
 */
static int idle_polls(struct ibv_cq *const *cq, int ncq, bool doorbells,
		      char *note, size_t size)
{
	struct idle_poll ip = { .ncq = ncq, .polls = 100000 };
	pthread_t t;
	void *ret = NULL;
	int uars = 0, i;

	for (i = 0; i < ncq && i < 2; i++)
		ip.cq[i] = cq[i];
	if (!doorbells)
		uars = protect_uars(PROT_NONE);
	if (!doorbells && uars < 1)
		return bad("cannot find or protect the UAR mappings");
	fflush(stdout);
	if (pthread_create(&t, NULL, idle_poll_thread, &ip))
		return bad("pthread_create failed");
	pthread_join(t, &ret);
	if (!doorbells && protect_uars(PROT_WRITE) != uars)
		return bad("cannot restore the UAR mappings");
	if (ret)
		return bad("seccomp strict mode is not available");
	if (ip.found)
		return bad("an idle CQ returned %d completions", ip.found);
	if (doorbells)
		snprintf(note, size, "%d empty polls of %d CQ%s: no syscall "
			 "(CQ_POLL doorbells allowed)", ip.polls, ncq,
			 ncq == 1 ? "" : "s");
	else
		snprintf(note, size, "%d empty polls of %d CQ%s: no syscall, "
			 "no doorbell (%d UAR pages protected)", ip.polls, ncq,
			 ncq == 1 ? "" : "s", uars);
	return 0;
}

/* Both CQs of the pair; a remote responder's in the agent's process. */
static int empty_poll_is_free(struct pair *p)
{
	struct ibv_cq *cq[2] = { p->a.cq, p->b.cq };
	struct agent *ag = remote_of(&p->b);
	char note[256];
	struct msg *m;
	size_t n;

	drain_cq(&p->a);
	drain_cq(&p->b);
	if (idle_polls(cq, ag ? 1 : 2, cq_poll_doorbells, note, sizeof(note)))
		return -1;
	printf("measured: %s\n", note);
	if (!ag)
		return 0;
	m = req();
	put_u32(m, 1);
	put_u32(m, p->b.id);
	put_u32(m, cq_poll_doorbells);
	if (rpc(ag, OP_IDLE_POLLS, 30000) < 0)
		return annotate("in the responder's process");
	n = rs.len < sizeof(note) - 1 ? rs.len : sizeof(note) - 1;
	memcpy(note, rs.b, n);
	note[n] = 0;
	printf("measured on %s: %s\n", ag->host, note);
	return 0;
}

static void test_errors(struct pair *p)
{
	error_case(p, loc_prot_err(p, true),
		   "LOC_PROT_ERR for a deregistered lkey");
	error_case(p, loc_prot_err(p, false),
		   "LOC_PROT_ERR for an SGE beyond its MR");
	error_case(p, rem_access_err(p, IBV_WR_RDMA_WRITE, 0, true),
		   "REM_ACCESS_ERR for a deregistered rkey");
	error_case(p, rem_access_err(p, IBV_WR_RDMA_WRITE,
				     IBV_ACCESS_LOCAL_WRITE |
				     IBV_ACCESS_REMOTE_READ, false),
		   "REM_ACCESS_ERR for a WRITE to an MR without REMOTE_WRITE");
	error_case(p, rem_access_err(p, IBV_WR_RDMA_READ,
				     IBV_ACCESS_LOCAL_WRITE |
				     IBV_ACCESS_REMOTE_WRITE, false),
		   "REM_ACCESS_ERR for a READ from an MR without REMOTE_READ");
	error_case(p, too_long_send(p),
		   "REM_INV_REQ_ERR and LOC_LEN_ERR for a SEND longer than "
		   "the receive");
	error_case(p, rnr_err(p), "RNR_RETRY_EXC_ERR with rnr_retry 0");
	error_case(p, rnr_timer_exhausted(p),
		   "RNR_RETRY_EXC_ERR after 3 timed retries");
	error_case(p, rnr_then_receive(p, 7, RNR_TIMER_1MS),
		   "RNR with infinite retries completes once a receive is "
		   "posted");
	/* 6 x 245.76 ms outlasts the 15 ms wait plus the quiet check. */
	error_case(p, rnr_then_receive(p, 6, RNR_TIMER_245MS),
		   "RNR with 6 timed retries completes once a receive is "
		   "posted");
	error_case(p, rnr_in_window(p),
		   "RNR of a SEND with a SEND and a WRITE behind it: they "
		   "wait, then all complete in order, each once");
	error_case(p, error_in_window(p),
		   "REM_ACCESS_ERR of a WRITE with two behind it: flushed, "
		   "their bytes never land");
	if (p->b.type == IBV_QPT_XRC_RECV)
		error_case(p, srq_outlives_qp_err(p), "the XRC_RECV QP's ERR "
			   "and RESET leave the SRQ's receives waiting");
	else
		error_case(p, flush_recv(p), "WR_FLUSH_ERR for receives and "
			   "sends of a QP in ERR");
	error_case(p, flush_send(p),
		   "WR_FLUSH_ERR for sends waiting on RNR");
}

/* ---- what only XRC has (-X) ---------------------------------------------- */

/* Run check on p, then name the SRQ named before again. */
static int xrc_keep_tgt(struct pair *p, int (*check)(struct pair *))
{
	int k0 = p->b.tgt, ret = check(p);

	if (xrc_select(p, k0) && !ret)
		ret = -1;
	return ret;
}

/*
 * A SEND and its receive complete next, each the next CQE of its side:
 * whatever was refused before was not posted after all.
 */
static int send_comes_next(struct pair *p)
{
	struct expect e;

	if (send_and_receive(p, 0))
		return annotate("a SEND after the refused WR");
	e = recv_ok(p, next_wr_id - 1);
	return expect_wc(&p->b, &e);
}

/* len bytes at off in s's buffer are img; else say where they differ. */
static int expect_image(struct side *s, size_t off, const uint8_t *img,
			size_t len, const char *what)
{
	uint8_t *got = malloc(len);
	size_t i;
	int ret;

	if (!got)
		return bad("out of memory");
	ret = buf_get(s, off, got, len);
	for (i = 0; !ret && i < len; i++)
		if (got[i] != img[i])
			ret = bad("%s: %s: byte at buffer offset %zu is %#04x, "
				  "expected %#04x", s->name, what, off + i,
				  got[i], img[i]);
	free(got);
	return ret;
}

/*
 * One chain of four SENDs naming SRQ 0, 1, 0 and 1 (remote_srqn WR by
 * WR): each message takes the next receive of the SRQ it names and
 * completes on that SRQ's CQ, with the XRC_RECV QP's number.
 */
static int xrc_chain(struct pair *p)
{
	enum { N = 4, SLOT = 256, LEN = 40 };
	const size_t roff = SPARE_OFF + 2048;
	struct ibv_send_wr wr[N], *bad_wr = NULL;
	struct ibv_sge sge[N];
	uint64_t base = next_wr_id;
	struct expect e;
	int i, k, err;

	next_wr_id += 2 * N;
	fill_pattern(p->a.buf + SPARE_OFF, N * SLOT, (uint32_t)base);
	if (buf_set(&p->b, roff, CANARY, N * SLOT))
		return -1;
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < N; i++) {
		k = i % 2;
		if (xrc_select(p, k) ||
		    post_recv_buf(&p->b, base + N + i, roff + i * SLOT, SLOT))
			return -1;
		sge[i] = (struct ibv_sge){
			.addr = p->a.addr + SPARE_OFF + i * SLOT,
			.length = LEN + 8 * i, .lkey = p->a.lkey };
		wr[i] = (struct ibv_send_wr){
			.wr_id = base + i, .sg_list = &sge[i], .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
			.next = i + 1 < N ? &wr[i + 1] : NULL };
		wr[i].qp_type.xrc.remote_srqn = p->b.tk[k].srqn;
	}
	if (side_post_send(&p->a, wr, &bad_wr, &err))
		return -1;
	if (err)
		return bad("requester: ibv_post_send: %s", strerror(err));
	for (i = 0; i < N; i++) {
		e = send_ok(&p->a, base + i, IBV_WC_SEND);
		if (expect_wc(&p->a, &e))
			return -1;
	}
	for (k = 0; k < 2; k++) {
		if (xrc_select(p, k))
			return -1;
		for (i = k; i < N; i += 2) {
			size_t off = roff + i * SLOT;

			e = recv_ok(p, base + N + i);
			e.byte_len = LEN + 8 * i;
			if (expect_wc(&p->b, &e) ||
			    expect_bytes(&p->b, off,
					 p->a.buf + SPARE_OFF + i * SLOT,
					 e.byte_len, "received data differ") ||
			    verify_canary(&p->b, off + e.byte_len,
					  SLOT - e.byte_len))
				return annotate(k ? "SRQ 1" : "SRQ 0");
		}
		if (expect_no_cqe(&p->b))
			return -1;
	}
	return 0;
}

/*
 * The extended post API in one batch of every opcode, each naming its
 * SRQ with ibv_wr_set_xrc_srqn (SRQ 0 and 1 in turn, with the keys of
 * that SRQ's PD): SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM,
 * RDMA_READ, ATOMIC_FETCH_AND_ADD, ATOMIC_CMP_AND_SWP, SEND and, where
 * the device has it, ATOMIC_WRITE. Completions in order on the
 * requester, receives on the CQ of the SRQ named, every byte in place.
 */
static int xrc_wr_api(struct pair *p)
{
	enum { WIN = 20480, L_SIMM = 100, L_WR = 200, L_WIMM = 300,
	       L_RD = 400, L_SEND = 64 };
	/* Within the window at DATA_OFF: each operation's bytes. */
	enum { O_SIMM = 0, O_WR = 4096, O_WIMM = 8192, O_RD = 12288,
	       O_SEND = 16384 };
	static const int wc_op[] = {
		IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE,
		IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD, IBV_WC_COMP_SWAP,
		IBV_WC_SEND, IBV_WC_ATOMIC_WRITE,
	};
	const size_t aoff = SPARE_OFF + 1024, rtgt = SPARE_OFF + 2048;
	const uint64_t init[3] = { 0x0202020202020202ull,
				   0x0505050505050505ull, 0 };
	const uint64_t want[3] = { 0x0303030303030303ull,
				   0x0a0a0a0a0a0a0a0aull,
				   0x0707070707070707ull };
	struct side *a = &p->a, *b = &p->b;
	struct ibv_qp_ex *qx = a->qpx;
	const uint64_t base = next_wr_id;
	const uint32_t imm0 = 0x0c0ffee0u ^ (uint32_t)base;
	const uint32_t imm1 = imm0 ^ 0x11111111u;
	uint8_t rsrc[L_RD], *img;
	uint64_t mem[3];
	int n = a->atomic_write ? 8 : 7, i, err, ret;
	struct expect e;

	next_wr_id += 11;
	fill_pattern(a->buf + DATA_OFF, WIN, (uint32_t)base);
	memset(a->buf + DATA_OFF + O_RD, CANARY, 4096);
	memset(a->buf + aoff, CANARY, 16);
	fill_pattern(rsrc, L_RD, (uint32_t)base ^ 0x5a5a5a5au);
	if (buf_set(b, DATA_OFF, CANARY, WIN) ||
	    buf_put(b, DATA_OFF + O_RD, rsrc, L_RD) ||
	    buf_put(b, aoff, init, sizeof(init)) ||
	    buf_set(b, rtgt, CANARY, 64))
		return -1;
	/* SEND_WITH_IMM to SRQ 0; WRITE_WITH_IMM and SEND to SRQ 1. */
	if (xrc_select(p, 0) ||
	    post_recv_buf(b, base + 8, DATA_OFF + O_SIMM, 128) ||
	    xrc_select(p, 1) || post_recv_buf(b, base + 9, rtgt, 64) ||
	    post_recv_buf(b, base + 10, DATA_OFF + O_SEND, 64))
		return -1;

	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	qx->wr_id = base;
	ibv_wr_send_imm(qx, htobe32(imm0));
	ibv_wr_set_xrc_srqn(qx, b->tk[0].srqn);
	ibv_wr_set_sge(qx, a->lkey, a->addr + DATA_OFF + O_SIMM, L_SIMM);
	qx->wr_id = base + 1;
	ibv_wr_rdma_write(qx, b->tk[1].rkey, b->addr + DATA_OFF + O_WR);
	ibv_wr_set_xrc_srqn(qx, b->tk[1].srqn);
	ibv_wr_set_sge(qx, a->lkey, a->addr + DATA_OFF + O_WR, L_WR);
	qx->wr_id = base + 2;
	ibv_wr_rdma_write_imm(qx, b->tk[1].rkey, b->addr + DATA_OFF + O_WIMM,
			      htobe32(imm1));
	ibv_wr_set_xrc_srqn(qx, b->tk[1].srqn);
	ibv_wr_set_sge(qx, a->lkey, a->addr + DATA_OFF + O_WIMM, L_WIMM);
	qx->wr_id = base + 3;
	ibv_wr_rdma_read(qx, b->tk[0].rkey, b->addr + DATA_OFF + O_RD);
	ibv_wr_set_xrc_srqn(qx, b->tk[0].srqn);
	ibv_wr_set_sge(qx, a->lkey, a->addr + DATA_OFF + O_RD, L_RD);
	qx->wr_id = base + 4;
	ibv_wr_atomic_fetch_add(qx, b->tk[1].rkey, b->addr + aoff,
				0x0101010101010101ull);
	ibv_wr_set_xrc_srqn(qx, b->tk[1].srqn);
	ibv_wr_set_sge(qx, a->lkey, a->addr + aoff, 8);
	qx->wr_id = base + 5;
	ibv_wr_atomic_cmp_swp(qx, b->tk[0].rkey, b->addr + aoff + 8,
			      init[1], want[1]);
	ibv_wr_set_xrc_srqn(qx, b->tk[0].srqn);
	ibv_wr_set_sge(qx, a->lkey, a->addr + aoff + 8, 8);
	qx->wr_id = base + 6;
	ibv_wr_send(qx);
	ibv_wr_set_xrc_srqn(qx, b->tk[1].srqn);
	ibv_wr_set_sge(qx, a->lkey, a->addr + DATA_OFF + O_SEND, L_SEND);
	if (a->atomic_write) {
		qx->wr_id = base + 7;
		ibv_wr_atomic_write(qx, b->tk[0].rkey, b->addr + aoff + 16,
				    &want[2]);
		ibv_wr_set_xrc_srqn(qx, b->tk[0].srqn);
	}
	err = ibv_wr_complete(qx);
	if (err)
		return bad("ibv_wr_complete: %s", strerror(err));

	for (i = 0; i < n; i++) {
		e = send_ok(a, base + i, wc_op[i]);
		if (expect_wc(a, &e))
			return -1;
	}
	if (xrc_select(p, 0))
		return -1;
	e = recv_ok(p, base + 8);
	e.byte_len = L_SIMM;
	e.wc_flags = IBV_WC_WITH_IMM;
	e.imm = imm0;
	if (expect_wc(b, &e) || expect_no_cqe(b))
		return annotate("SRQ 0");
	if (xrc_select(p, 1))
		return -1;
	e = recv_ok(p, base + 9);
	e.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	e.byte_len = L_WIMM;
	e.wc_flags = IBV_WC_WITH_IMM;
	e.imm = imm1;
	if (expect_wc(b, &e))
		return annotate("SRQ 1");
	e = recv_ok(p, base + 10);
	e.byte_len = L_SEND;
	if (expect_wc(b, &e) || expect_no_cqe(b))
		return annotate("SRQ 1");

	/* The responder's window: what each request put there, canaries. */
	img = malloc(WIN);
	if (!img)
		return bad("out of memory");
	memset(img, CANARY, WIN);
	memcpy(img + O_SIMM, a->buf + DATA_OFF + O_SIMM, L_SIMM);
	memcpy(img + O_WR, a->buf + DATA_OFF + O_WR, L_WR);
	memcpy(img + O_WIMM, a->buf + DATA_OFF + O_WIMM, L_WIMM);
	memcpy(img + O_RD, rsrc, L_RD);
	memcpy(img + O_SEND, a->buf + DATA_OFF + O_SEND, L_SEND);
	ret = expect_image(b, DATA_OFF, img, WIN, "the window");
	free(img);
	if (ret || verify_canary(b, rtgt, 64))
		return -1;
	if (memcmp(a->buf + DATA_OFF + O_RD, rsrc, L_RD))
		return bad("the READ brought other bytes");
	for (i = L_RD; i < 4096; i++)
		if (a->buf[DATA_OFF + O_RD + i] != CANARY)
			return bad("the READ wrote past its SGE");
	if (memcmp(a->buf + aoff, init, 16))
		return bad("the atomics returned %#" PRIx64 " and %#" PRIx64
			   ", expected %#" PRIx64 " and %#" PRIx64,
			   ((uint64_t *)(a->buf + aoff))[0],
			   ((uint64_t *)(a->buf + aoff))[1], init[0], init[1]);
	if (buf_get(b, aoff, mem, sizeof(mem)))
		return -1;
	for (i = 0; i < 3; i++) {
		uint64_t w = i < 2 || a->atomic_write ? want[i] : init[i];

		if (mem[i] != w)
			return bad("responder word %d after the atomics is %#"
				   PRIx64 ", expected %#" PRIx64, i, mem[i], w);
	}
	return 0;
}

/* A SEND through ibv_wr_* naming no SRQ: wr_complete refuses it. */
static int xrc_wr_api_no_srqn(struct pair *p)
{
	struct ibv_qp_ex *qx = p->a.qpx;
	int err;

	ibv_wr_start(qx);
	qx->wr_id = next_wr_id++;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, p->a.lkey, p->a.addr + SPARE_OFF, 64);
	err = ibv_wr_complete(qx);
	if (err != EINVAL)
		return bad("ibv_wr_complete returned %d (%s), expected EINVAL",
			   err, strerror(err));
	return send_comes_next(p);
}

/* An SRQ number beyond 24 bits: ibv_post_send refuses the WR. */
static int xrc_srqn_too_wide(struct pair *p)
{
	struct ibv_sge sge = { .addr = p->a.addr + SPARE_OFF, .length = 64,
			       .lkey = p->a.lkey };
	struct ibv_send_wr wr = { .wr_id = next_wr_id++, .sg_list = &sge,
				  .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	uint32_t srqn = p->a.remote_srqn;
	int ret;

	p->a.remote_srqn = XRC_NO_SRQN + 1;
	ret = expect_send_rejected(&p->a, &wr, &wr);
	p->a.remote_srqn = srqn;
	return ret || send_comes_next(p);
}

/*
 * A request naming an SRQ the XRC_RECV QP may not use: an SRQ of another
 * XRC domain of the responder's device (for a SEND, with a receive
 * waiting in it), or a number no SRQ has. The responder refuses it as
 * an invalid request: REM_INV_REQ_ERR; no receive is taken, no byte
 * lands.
 */
static int xrc_foreign_srq(struct pair *p, bool other_domain,
			   enum ibv_wr_opcode op)
{
	const size_t target = SPARE_OFF + 2048;
	struct ibv_sge sge = { .addr = p->a.addr + DATA_OFF, .length = 64,
			       .lkey = p->a.lkey };
	struct ibv_send_wr wr = { .wr_id = next_wr_id++, .sg_list = &sge,
				  .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED };
	int k0 = p->b.tgt, ret = -1;
	struct expect e;

	fill_pattern(p->a.buf + DATA_OFF, 64, (uint32_t)wr.wr_id);
	if (buf_set(&p->b, target, CANARY, 64))
		return -1;
	if (other_domain) {
		if (xrc_select(p, XRC_OTHER) ||
		    (op == IBV_WR_SEND &&
		     post_recv_buf(&p->b, wr.wr_id, target, 64)))
			goto out;
	}
	wr.wr.rdma.remote_addr = p->b.addr + target;
	wr.wr.rdma.rkey = p->b.rkey;
	if (!other_domain)
		p->a.remote_srqn = XRC_NO_SRQN;
	ret = -1;
	/* (post_send names the SRQ the requester targets) */
	if (post_send(&p->a, &wr))
		goto out;
	e = wc_error(&p->a, wr.wr_id, IBV_WC_REM_INV_REQ_ERR);
	if (expect_wc(&p->a, &e))
		goto out;
	if (expect_no_cqe(&p->b)) {
		annotate("the CQ of the SRQ named");
		goto out;
	}
	ret = verify_canary(&p->b, target, 64);
out:
	if (xrc_select(p, k0) && !ret)
		ret = -1;
	return ret;
}

/*
 * The keys of an XRC request are checked against the PD of the SRQ it
 * names: an RDMA READ, WRITE or atomic with the rkey of the responder's
 * buffer in the other SRQ's PD (the same bytes, registered in both) is
 * refused with REM_ACCESS_ERR, and touches nothing on either side.
 */
static int xrc_rkey_of_other_pd(struct pair *p, enum ibv_wr_opcode op)
{
	const size_t target = SPARE_OFF + 2048;
	bool atomic = op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
		      op == IBV_WR_ATOMIC_CMP_AND_SWP;
	struct ibv_sge sge = { .addr = p->a.addr + DATA_OFF,
			       .length = atomic ? 8 : 64, .lkey = p->a.lkey };
	struct ibv_send_wr wr = { .wr_id = next_wr_id++, .sg_list = &sge,
				  .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED };
	uint32_t rkey = p->b.tk[p->b.tgt == 0].rkey;
	struct expect e;
	int i;

	if (p->b.tgt > 1)
		return bad("SRQ %d is not of the domain", p->b.tgt);
	if (buf_set(&p->b, target, CANARY, 64))
		return -1;
	memset(p->a.buf + DATA_OFF, 0x3c, 64);
	if (atomic) {
		wr.wr.atomic.remote_addr = p->b.addr + target;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = p->b.addr + target;
		wr.wr.rdma.rkey = rkey;
	}
	if (post_send(&p->a, &wr))
		return -1;
	e = wc_error(&p->a, wr.wr_id, IBV_WC_REM_ACCESS_ERR);
	if (expect_wc(&p->a, &e) || verify_canary(&p->b, target, 64))
		return -1;
	for (i = 0; i < 64; i++)
		if (p->a.buf[DATA_OFF + i] != 0x3c)
			return bad("the refused request wrote local memory");
	return expect_no_cqe(&p->b);
}

static void test_xrc(struct pair *p)
{
	static const struct {
		enum ibv_wr_opcode op;
		const char *name;
	} pd_ops[] = {
		{ IBV_WR_RDMA_WRITE, "WRITE" },
		{ IBV_WR_RDMA_WRITE, "WRITE" },
		{ IBV_WR_RDMA_READ, "READ" },
		{ IBV_WR_ATOMIC_FETCH_AND_ADD, "FETCH_AND_ADD" },
	};
	char name[160];
	size_t i;

	report(p, xrc_keep_tgt(p, xrc_chain), "%s: one chain of SENDs naming "
	       "SRQ 0, 1, 0, 1: each takes a receive of the SRQ it names, on "
	       "that SRQ's CQ", p->name);
	recover(p, "a chain naming two SRQs");
	report(p, xrc_keep_tgt(p, xrc_wr_api), "%s: ibv_wr_* naming SRQ 0 and "
	       "1 by ibv_wr_set_xrc_srqn: SEND_WITH_IMM, WRITE, "
	       "WRITE_WITH_IMM, READ, FETCH_AND_ADD, CMP_AND_SWP, SEND%s",
	       p->name,
	       p->a.atomic_write ? ", ATOMIC_WRITE" : "");
	recover(p, "ibv_wr_*");
	report(p, xrc_wr_api_no_srqn(p), "%s: an ibv_wr_* SEND without "
	       "ibv_wr_set_xrc_srqn is refused (EINVAL)", p->name);
	recover(p, "ibv_wr_*");
	report(p, xrc_srqn_too_wide(p), "%s: a remote_srqn beyond 24 bits is "
	       "refused (EINVAL)", p->name);
	recover(p, "refused WRs");
	error_case(p, xrc_foreign_srq(p, true, IBV_WR_SEND),
		   "REM_INV_REQ_ERR for a SEND naming an SRQ of another XRC "
		   "domain, whose receive stays");
	error_case(p, xrc_foreign_srq(p, true, IBV_WR_RDMA_WRITE),
		   "REM_INV_REQ_ERR for a WRITE naming an SRQ of another XRC "
		   "domain");
	error_case(p, xrc_foreign_srq(p, false, IBV_WR_SEND),
		   "REM_INV_REQ_ERR for a SEND naming no SRQ");
	for (i = 0; i < sizeof(pd_ops) / sizeof(pd_ops[0]); i++) {
		snprintf(name, sizeof(name), "REM_ACCESS_ERR for a %s with the "
			 "rkey of SRQ %d's PD", pd_ops[i].name,
			 p->b.tgt == 0);
		error_case(p, xrc_rkey_of_other_pd(p, pd_ops[i].op), name);
	}
}

/* ---- SRQ ----------------------------------------------------------------- */

/* Two QPs on one SRQ: each CQE names the QP that took the message. */
static int srq_shared(struct pair *p2, struct pair *p3)
{
	uint64_t r0 = next_wr_id++, r1 = next_wr_id++;
	uint64_t s2 = next_wr_id++, s3 = next_wr_id++;
	size_t roff[2] = { SPARE_OFF, SPARE_OFF + 1024 };
	struct ibv_wc wc;
	struct expect e;
	int i;

	if (buf_set(&p2->b, SPARE_OFF, 0, 2048))
		return -1;
	fill_pattern(p2->a.buf + SPARE_OFF, 100, (uint32_t)s2);
	fill_pattern(p3->a.buf + SPARE_OFF, 200, (uint32_t)s3);
	if (post_recv_buf(&p2->b, r0, roff[0], 512) ||
	    post_recv_buf(&p2->b, r1, roff[1], 512))
		return -1;
	if (post_send_buf(&p2->a, s2, SPARE_OFF, 100, 0) ||
	    post_send_buf(&p3->a, s3, SPARE_OFF, 200, 0))
		return -1;
	e = send_ok(&p2->a, s2, IBV_WC_SEND);
	if (expect_wc(&p2->a, &e))
		return -1;
	e = send_ok(&p3->a, s3, IBV_WC_SEND);
	if (expect_wc(&p3->a, &e))
		return -1;

	for (i = 0; i < 2; i++) {
		struct pair *p = i ? p3 : p2;
		uint32_t len = i ? 200 : 100;
		char what[64];
		size_t off;

		if (poll_n(&p->b, &wc, 1))
			return -1;
		if (wc.wr_id != r0 && wc.wr_id != r1)
			return bad("%s: wr_id %" PRIu64 " was never posted",
				   p->name, wc.wr_id);
		e = (struct expect){ .wr_id = wc.wr_id,
				     .status = IBV_WC_SUCCESS,
				     .opcode = IBV_WC_RECV, .byte_len = len,
				     .qp_num = p->b.qpn, .recv = true,
				     .src_qp = p->a.qpn };
		if (check_wc(&p->b, &wc, &e))
			return -1;
		/* Both responders share one buffer (p2's); see its MR. */
		off = roff[wc.wr_id == r1];
		snprintf(what, sizeof(what), "%s: received data differ",
			 p->name);
		if (expect_bytes(&p2->b, off, p->a.buf + SPARE_OFF, len,
				 what))
			return -1;
	}
	return 0;
}

static int srq_limit(struct srq *srq)
{
	struct ibv_srq_attr attr = { .srq_limit = 4 };

	if (srq_modify(srq, &attr, IBV_SRQ_LIMIT))
		return -1;
	memset(&attr, 0, sizeof(attr));
	if (srq_query(srq, &attr))
		return -1;
	if (attr.srq_limit != 4 || attr.max_wr < QP_DEPTH)
		return bad("query: limit %u max_wr %u", attr.srq_limit,
			   attr.max_wr);
	return 0;
}

/*
 * Resizing with receives waiting (IBV_SRQ_MAX_WR): 6 receives posted, 2
 * taken; the SRQ grown to 4 x QP_DEPTH, 6 more posted; 10 SENDs: the
 * receives complete in the order they were posted, each holding its own
 * message. Then 3 posted, the SRQ back to QP_DEPTH, 3 SENDs, the same.
 */
static int srq_resize_send(struct pair *p, uint64_t rid, int i)
{
	enum { LEN = 256 };
	size_t off = SPARE_OFF + (size_t)i * LEN;
	uint64_t sid = next_wr_id++;
	struct ibv_wc wc;
	struct expect e;

	fill_pattern(p->a.buf + off, LEN, (uint32_t)sid);
	if (post_send_buf(&p->a, sid, off, LEN, 0))
		return -1;
	e = send_ok(&p->a, sid, IBV_WC_SEND);
	if (expect_wc(&p->a, &e) || poll_n(&p->b, &wc, 1))
		return -1;
	e = (struct expect){ .wr_id = rid, .status = IBV_WC_SUCCESS,
			     .opcode = IBV_WC_RECV, .byte_len = LEN,
			     .qp_num = p->b.qpn, .recv = true,
			     .src_qp = p->a.qpn };
	if (check_wc(&p->b, &wc, &e))
		return -1;
	return expect_bytes(&p->b, off, p->a.buf + off, LEN,
			    "srq resize: received data differ");
}

static int srq_resize(struct pair *p, struct srq *srq)
{
	enum { N = 15, LEN = 256 };
	struct ibv_srq_attr attr = {};
	uint64_t rid[N];
	int i;

	if (buf_set(&p->b, SPARE_OFF, 0, N * LEN))
		return -1;
	for (i = 0; i < N; i++)
		rid[i] = next_wr_id++;
	for (i = 0; i < 6; i++)
		if (post_recv_buf(&p->b, rid[i], SPARE_OFF + i * LEN, LEN))
			return -1;
	for (i = 0; i < 2; i++)
		if (srq_resize_send(p, rid[i], i))
			return -1;
	attr.max_wr = 4 * QP_DEPTH;
	if (srq_modify(srq, &attr, IBV_SRQ_MAX_WR) || srq_query(srq, &attr))
		return -1;
	if (attr.max_wr < 4 * QP_DEPTH)
		return bad("query after the resize: max_wr %u", attr.max_wr);
	for (i = 6; i < 12; i++)
		if (post_recv_buf(&p->b, rid[i], SPARE_OFF + i * LEN, LEN))
			return -1;
	for (i = 2; i < 12; i++)
		if (srq_resize_send(p, rid[i], i))
			return -1;
	for (i = 12; i < N; i++)
		if (post_recv_buf(&p->b, rid[i], SPARE_OFF + i * LEN, LEN))
			return -1;
	attr.max_wr = QP_DEPTH;
	if (srq_modify(srq, &attr, IBV_SRQ_MAX_WR))
		return -1;
	for (i = 12; i < N; i++)
		if (srq_resize_send(p, rid[i], i))
			return -1;
	return 0;
}

static int reject_recv_on_srq_qp(struct side *s)
{
	return expect_recv_rejected(s, "ibv_post_recv");
}

static void test_srq(struct dev *da, struct dev *db)
{
	struct ibv_srq_attr sattr = { .max_wr = QP_DEPTH,
				      .max_sge = max_sge_of(da, db) };
	static const size_t sizes[] = { 1, 4095, 4096, 65536 };
	struct pair p2 = {}, p3 = {};
	struct srq srq;
	size_t s;
	int ret;

	if (db->attr.max_srq_sge && (int)sattr.max_sge >
				    db->attr.max_srq_sge)
		sattr.max_sge = db->attr.max_srq_sge;
	ret = srq_create(&srq, db, &sattr);
	report(NULL, ret, "srq: create");
	if (ret)
		return;

	ret = pair_create(&p2, "srq", da, db, &srq, 1, false);
	if (!ret)
		ret = pair_create(&p3, "srq2", da, db, &srq, 0, false);
	if (!ret)
		ret = connect_pair(&p2, 7, MIN_RNR_TIMER);
	if (!ret)
		ret = connect_pair(&p3, 7, MIN_RNR_TIMER);
	report(NULL, ret, "srq: two RC pairs whose responders share an SRQ");
	if (!ret) {
		if (native_peer)
			printf("# srq: post_recv on the responder's QP with an "
			       "SRQ: its own provider's rule, not checked\n");
		else
			report(&p2, reject_recv_on_srq_qp(&p2.b), "srq: "
			       "post_recv on a QP with an SRQ is refused "
			       "(EINVAL)");
		report(&p2, srq_limit(&srq), "srq: modify and query the limit");
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			report(&p2, transfer(&p2, IBV_WR_SEND, sizes[s], 0, 0,
					     1, 1, 0),
			       "srq: send len %zu", sizes[s]);
			recover(&p2, "send");
		}
		report(&p2, transfer(&p2, IBV_WR_SEND_WITH_IMM, 4096, 13, 29,
				     1, 1, 0), "srq: send_imm len 4096");
		recover(&p2, "send_imm");
		report(&p2, transfer(&p2, IBV_WR_RDMA_WRITE_WITH_IMM, 4096, 13,
				     29, 1, 1, 0), "srq: write_imm len 4096");
		recover(&p2, "write_imm");
		test_sges(&p2);
		report(&p2, sig_all(&p2),
		       "srq: sq_sig_all signals a WR without SIGNALED");
		recover(&p2, "sq_sig_all");
		report(&p2, srq_shared(&p2, &p3),
		       "srq: two QPs take receives from one SRQ");
		if (db->attr.device_cap_flags & IBV_DEVICE_SRQ_RESIZE)
			report(&p2, srq_resize(&p2, &srq), "srq: resize with "
			       "receives waiting keeps their order");
		else
			printf("# srq: %s cannot resize an SRQ (no "
			       "IBV_DEVICE_SRQ_RESIZE): not checked\n",
			       db->name);
	}

	ret = side_destroy(&p3.b);
	ret |= side_destroy(&p3.a);
	ret |= side_destroy(&p2.b);
	ret |= side_destroy(&p2.a);
	ret |= srq_destroy(&srq);
	report(NULL, ret, "srq: teardown");
}

/* ---- the agent (-s): a remote responder's end ----------------------------- */

/* What the agent holds for its one client: its device, and objects. */
enum { OBJ_SIDE = 1, OBJ_SRQ, OBJ_MR };
static const char *const obj_names[] = { "", "side", "SRQ", "MR" };

static struct dev agent_dev;
static struct {
	int kind;
	void *p;
} obj[MAX_OBJ];

/* A handle (index + 1) for p, or -1. */
static int obj_add(int kind, void *p)
{
	int i;

	for (i = 0; i < MAX_OBJ; i++) {
		if (!obj[i].kind) {
			obj[i].kind = kind;
			obj[i].p = p;
			return i + 1;
		}
	}
	return bad("agent: no room for another %s", obj_names[kind]);
}

static void *obj_get(uint32_t id, int kind)
{
	if (id < 1 || id > MAX_OBJ || obj[id - 1].kind != kind) {
		bad("agent: no %s %u", obj_names[kind], id);
		return NULL;
	}
	return obj[id - 1].p;
}

static void obj_del(uint32_t id)
{
	obj[id - 1].kind = 0;
	obj[id - 1].p = NULL;
}

/* Destroy a side the agent made, and forget it. */
static int agent_side_destroy(uint32_t id)
{
	struct side *s = obj[id - 1].p;
	char *name = (char *)s->name;
	int ret = side_destroy(s);

	free(name);
	free(s);
	obj_del(id);
	return ret;
}

/*
 * Carry out one request (in) with the same functions the checks use on
 * local sides; the output goes to out. Returns the result for the answer
 * (>= 0), or -1 with why.
 */
static int agent_serve(uint32_t op, struct msg *in, struct msg *out)
{
	struct ibv_send_wr swr[MAX_WRS], *sbad = NULL;
	struct ibv_recv_wr rwr[MAX_WRS], *rbad = NULL;
	static struct ibv_sge sge[MAX_WRS][MAX_SGE + 1];
	struct ibv_wc wc[CQ_DEPTH];
	struct ibv_qp_init_attr init;
	struct ibv_srq_attr sattr;
	struct ibv_qp_attr attr;
	char name[64], note[256];
	struct side *s = NULL;
	struct srq *q;
	struct mr *m;
	uint32_t id, a1, a2, a3 = 0;
	int i, ret, err;

	switch (op) {
	case OP_OPEN:
		get_str(in, name, 64);
		i = (int32_t)get_u32(in);
		a1 = get_u32(in);
		if (in->bad)
			break;
		if (agent_dev.ctx)
			return bad("agent: the device is open already");
		if (a1 > 0 && a1 < INT_MAX)
			timeout_ms = (int)a1;
		agent_dev.name = strdup(name);
		if (!agent_dev.name || dev_open(&agent_dev, agent_dev.name, i))
			return -1;
		printf("# agent: %s, GID index %d, for the client\n",
		       agent_dev.name, agent_dev.gid_index);
		put(out, &agent_dev.attr, sizeof(agent_dev.attr));
		put(out, &agent_dev.port_attr, sizeof(agent_dev.port_attr));
		put_u32(out, agent_dev.gid_index);
		put(out, &agent_dev.gid, sizeof(agent_dev.gid));
		return 0;

	case OP_SIDE_CREATE: {
		enum ibv_qp_type type;
		char *nm;

		get_str(in, name, NAME_LEN);
		type = get_u32(in);
		id = get_u32(in);
		a1 = get_u32(in);
		a2 = get_u32(in);
		a3 = get_u32(in);
		if (in->bad)
			break;
		if (!agent_dev.pd)
			return bad("agent: no device open");
		if (type != IBV_QPT_RC && type != IBV_QPT_XRC_SEND &&
		    type != IBV_QPT_XRC_RECV)
			return bad("agent: QP type %d", type);
		if (id && type != IBV_QPT_RC)
			return bad("agent: an SRQ for an XRC QP");
		q = id ? obj_get(id, OBJ_SRQ) : NULL;
		if (id && !q)
			return -1;
		s = calloc(1, sizeof(*s));
		nm = strdup(name);
		if (!s || !nm) {
			free(s);
			free(nm);
			return bad("agent: out of memory");
		}
		if (side_create(s, nm, &agent_dev, type, q, a1, a2, a3)) {
			char first[sizeof(why)];

			memcpy(first, why, sizeof(why));
			side_destroy(s);
			memcpy(why, first, sizeof(why));
			free(nm);
			free(s);
			return -1;
		}
		id = obj_add(OBJ_SIDE, s);
		if ((int)id < 0) {
			side_destroy(s);
			free(nm);
			free(s);
			return -1;
		}
		put_u32(out, id);
		put_u32(out, s->qpn);
		put_u32(out, s->lkey);
		put_u32(out, s->rkey);
		put_u64(out, s->addr);
		put(out, &s->cap, sizeof(s->cap));
		put(out, s->tk, sizeof(s->tk));
		return 0;
	}

	case OP_XRC_SELECT:
		s = obj_get(get_u32(in), OBJ_SIDE);
		a1 = get_u32(in);
		if (in->bad)
			break;
		return s ? xrc_side_select(s, (int)a1) : -1;

	case OP_XRC_RENEW:
		s = obj_get(get_u32(in), OBJ_SIDE);
		if (in->bad)
			break;
		if (!s || xrc_side_renew(s))
			return -1;
		put(out, s->tk, sizeof(s->tk));
		return 0;

	case OP_SIDE_DESTROY:
		id = get_u32(in);
		if (in->bad)
			break;
		if (!obj_get(id, OBJ_SIDE))
			return -1;
		return agent_side_destroy(id);

	case OP_MODIFY_QP:
		s = obj_get(get_u32(in), OBJ_SIDE);
		get(in, &attr, sizeof(attr));
		a1 = get_u32(in);
		get_str(in, name, NAME_LEN);
		if (in->bad)
			break;
		return s ? modify(s, &attr, a1, name) : -1;

	case OP_QUERY_QP:
		s = obj_get(get_u32(in), OBJ_SIDE);
		a1 = get_u32(in);
		if (in->bad)
			break;
		if (!s || side_query_qp(s, &attr, a1, &init))
			return -1;
		put(out, &attr, sizeof(attr));
		put(out, &init.cap, sizeof(init.cap));
		return 0;

	case OP_POST_SEND:
		s = obj_get(get_u32(in), OBJ_SIDE);
		if (get_send_wrs(in, swr, sge))
			break;
		if (!s || side_post_send(s, swr, &sbad, &err))
			return -1;
		put_u32(out, err);
		put_u32(out, chain_index(swr, sbad, true));
		return 0;

	case OP_POST_RECV:
		s = obj_get(get_u32(in), OBJ_SIDE);
		a1 = get_u32(in);
		if (get_recv_wrs(in, rwr, sge))
			break;
		if (!s || side_post_recv(s, rwr, &rbad, a1, &err))
			return -1;
		put_u32(out, err);
		put_u32(out, chain_index(rwr, rbad, false));
		return 0;

	case OP_POLL:
		s = obj_get(get_u32(in), OBJ_SIDE);
		a1 = get_u32(in);
		a2 = get_u32(in);
		a3 = get_u32(in);
		if (in->bad)
			break;
		if (a1 < 1 || a1 > CQ_DEPTH || a2 > 600000 || a3 > 1000000)
			return bad("agent: poll for %u in %u ms", a1, a2);
		if (!s)
			return -1;
		ret = side_poll(s, wc, a1, a2, a3);
		if (ret > 0)
			put(out, wc, ret * sizeof(wc[0]));
		return ret;

	case OP_NOTIFY:
		s = obj_get(get_u32(in), OBJ_SIDE);
		a1 = get_u32(in);
		if (in->bad)
			break;
		return s ? side_notify(s, a1) : -1;

	case OP_WAIT_EVENT:
		s = obj_get(get_u32(in), OBJ_SIDE);
		a1 = get_u32(in);
		if (in->bad)
			break;
		if (a1 > 600000)
			return bad("agent: wait for %u ms", a1);
		return s ? wait_cq_event(s, a1) : -1;

	case OP_BUF_SET:
	case OP_BUF_PUT:
	case OP_BUF_GET:
		s = obj_get(get_u32(in), OBJ_SIDE);
		a1 = get_u32(in);
		a2 = get_u32(in);
		if (op == OP_BUF_SET)
			a3 = get_u32(in);
		if (in->bad || (op == OP_BUF_PUT && in->len - in->pos != a2))
			break;
		if (!s || buf_range(s, a1, a2))
			return -1;
		if (op == OP_BUF_SET)
			return buf_set(s, a1, a3, a2);
		if (op == OP_BUF_PUT) {
			in->pos = in->len;
			return buf_put(s, a1, in->b + in->len - a2, a2);
		}
		put(out, s->buf + a1, a2);
		return 0;

	case OP_REG_MR:
		s = obj_get(get_u32(in), OBJ_SIDE);
		a1 = get_u32(in);
		a2 = get_u32(in);
		a3 = get_u32(in);
		if (in->bad)
			break;
		if (!s)
			return -1;
		m = calloc(1, sizeof(*m));
		if (!m)
			return bad("agent: out of memory");
		if (mr_reg(m, s, a1, a2, a3)) {
			free(m);
			return -1;
		}
		id = obj_add(OBJ_MR, m);
		if ((int)id < 0) {
			mr_dereg(m);
			free(m);
			return -1;
		}
		put_u32(out, id);
		put_u32(out, m->lkey);
		put_u32(out, m->rkey);
		return 0;

	case OP_DEREG_MR:
		id = get_u32(in);
		if (in->bad)
			break;
		m = obj_get(id, OBJ_MR);
		if (!m)
			return -1;
		ret = mr_dereg(m);
		free(m);
		obj_del(id);
		return ret;

	case OP_SRQ_CREATE:
		get(in, &sattr, sizeof(sattr));
		if (in->bad)
			break;
		if (!agent_dev.pd)
			return bad("agent: no device open");
		q = calloc(1, sizeof(*q));
		if (!q)
			return bad("agent: out of memory");
		if (srq_create(q, &agent_dev, &sattr)) {
			free(q);
			return -1;
		}
		id = obj_add(OBJ_SRQ, q);
		if ((int)id < 0) {
			srq_destroy(q);
			free(q);
			return -1;
		}
		put_u32(out, id);
		return 0;

	case OP_SRQ_QUERY:
		q = obj_get(get_u32(in), OBJ_SRQ);
		if (in->bad)
			break;
		if (!q || srq_query(q, &sattr))
			return -1;
		put(out, &sattr, sizeof(sattr));
		return 0;

	case OP_SRQ_MODIFY:
		q = obj_get(get_u32(in), OBJ_SRQ);
		get(in, &sattr, sizeof(sattr));
		a1 = get_u32(in);
		if (in->bad)
			break;
		return q ? srq_modify(q, &sattr, a1) : -1;

	case OP_SRQ_DESTROY:
		id = get_u32(in);
		if (in->bad)
			break;
		q = obj_get(id, OBJ_SRQ);
		if (!q)
			return -1;
		for (i = 0; i < MAX_OBJ; i++)
			if (obj[i].kind == OBJ_SIDE &&
			    ((struct side *)obj[i].p)->srq == q)
				return bad("agent: SRQ %u is in use", id);
		ret = srq_destroy(q);
		free(q);
		obj_del(id);
		return ret;

	case OP_IDLE_POLLS: {
		struct ibv_cq *cq[2];

		a1 = get_u32(in);
		if (in->bad || a1 < 1 || a1 > 2)
			break;
		for (i = 0; i < (int)a1; i++) {
			s = obj_get(get_u32(in), OBJ_SIDE);
			if (!s)
				return -1;
			cq[i] = s->cq;
		}
		a2 = get_u32(in);
		if (in->bad || a2 > 1)
			break;
		if (idle_polls(cq, a1, a2, note, sizeof(note)))
			return -1;
		printf("measured: %s\n", note);
		put(out, note, strlen(note));
		return 0;
	}

	case OP_BYE:
		return 0;

	default:
		return bad("agent: unknown request %u", op);
	}
	return bad("agent: malformed %s request", op_name_of(op));
}

/* Whatever the client left behind; 0 if nothing was. */
static int agent_cleanup(void)
{
	static const int order[] = { OBJ_MR, OBJ_SIDE, OBJ_SRQ };
	int i, k, left = 0, ret = 0;

	for (k = 0; k < 3; k++) {
		for (i = 0; i < MAX_OBJ; i++) {
			if (obj[i].kind != order[k])
				continue;
			left++;
			if (order[k] == OBJ_SIDE) {
				ret |= agent_side_destroy(i + 1);
				continue;
			}
			if (order[k] == OBJ_MR)
				ret |= mr_dereg(obj[i].p);
			else
				ret |= srq_destroy(obj[i].p);
			free(obj[i].p);
			obj_del(i + 1);
		}
	}
	if (agent_dev.pd && ibv_dealloc_pd(agent_dev.pd))
		ret = bad("agent: ibv_dealloc_pd failed");
	if (agent_dev.ctx && ibv_close_device(agent_dev.ctx))
		ret = bad("agent: ibv_close_device failed");
	free((char *)agent_dev.name);
	if (left)
		printf("# agent: the client left %d objects behind\n", left);
	if (ret)
		printf("# agent: cleanup: %s\n", why);
	return left || ret ? -1 : 0;
}

static int run_agent(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	struct pollfd pfd;
	socklen_t len = sizeof(sa);
	unsigned long served = 0;
	int lfd, fd, one = 1, ret;
	bool bye = false;
	uint32_t op;
	char peer[64];

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1)) {
		printf("# agent: cannot listen on port %d: %s\n", port,
		       strerror(errno));
		return 1;
	}
	printf("# agent: listening on port %d\n", port);
	fflush(stdout);
	pfd = (struct pollfd){ .fd = lfd, .events = POLLIN };
	/* No limit: when the client comes depends on how long its machine
	 * takes to boot; whoever started the agent stops it. */
	if (poll(&pfd, 1, -1) != 1) {
		printf("# agent: poll: %s\n", strerror(errno));
		return 1;
	}
	fd = accept(lfd, (struct sockaddr *)&sa, &len);
	close(lfd);
	if (fd < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)) {
		printf("# agent: accept: %s\n", strerror(errno));
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	snprintf(peer, sizeof(peer), "client %s", inet_ntoa(sa.sin_addr));
	printf("# agent: %s connected\n", peer);
	fflush(stdout);

	for (;;) {
		long long idle = 10LL * timeout_ms > IDLE_MS ?
				 10LL * timeout_ms : IDLE_MS;

		if (msg_recv(fd, &op, &rq, now_ms() + idle, peer)) {
			printf("# agent: %s\n", why);
			break;
		}
		msg_reset(&rs);
		ret = agent_serve(op, &rq, &rs);
		if (ret >= 0 && rs.bad)
			ret = bad("agent: answer to %s too large",
				  op_name_of(op));
		if (ret < 0) {
			msg_reset(&rs);
			put(&rs, why, strlen(why));
			printf("# agent: %s: %s\n", op_name_of(op), why);
		} else if (verbose) {
			printf("# agent: %s -> %d\n", op_name_of(op), ret);
		}
		fflush(stdout);
		served++;
		if (msg_send(fd, (uint32_t)ret, &rs, now_ms() + timeout_ms,
			     peer)) {
			printf("# agent: %s\n", why);
			break;
		}
		if (op == OP_BYE) {
			bye = true;
			break;
		}
	}
	close(fd);
	ret = agent_cleanup();
	printf("# agent: served %lu requests; %s\n", served,
	       bye ? "the client said goodbye" : "the client went away");
	return bye && !ret ? 0 : 1;
}

/* ---- main ---------------------------------------------------------------- */

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s -d DEV [-D PEER_DEV] [-g GID_INDEX] "
		"[-G PEER_GID_INDEX] [-t TIMEOUT_S] [-c AGENT_HOST [-p PORT]] "
		"[-P] [-X]\n"
		"       %s -s [-p PORT] [-v]\n", prog, prog);
	exit(2);
}

static void set_path(const struct dev *da, const struct dev *db)
{
	int rd = da->attr.max_qp_init_rd_atom < db->attr.max_qp_rd_atom ?
		 da->attr.max_qp_init_rd_atom : db->attr.max_qp_rd_atom;

	if (rd < 1) {
		printf("# max_qp_rd_atom/max_qp_init_rd_atom is %d; using 1\n",
		       rd);
		rd = 1;
	}
	rd_atomic = rd > 16 ? 16 : rd;
	path_mtu = da->port_attr.active_mtu < db->port_attr.active_mtu ?
		   da->port_attr.active_mtu : db->port_attr.active_mtu;
}

static void dev_close(struct dev *d)
{
	if (d->remote) {
		struct agent *a = d->remote;

		req();
		if (rpc(a, OP_BYE, 0) < 0)
			printf("# agent at %s: goodbye: %s\n", a->host, why);
		else
			printf("# agent at %s: %lu requests\n", a->host,
			       a->calls);
		agent_lost(a);
		return;
	}
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
}

/*
 * Every check of one pair, RC or XRC (then the checks only XRC has);
 * with -X, SRQ 0 and SRQ 1 take turns from one check to the next.
 * Fails only if the pair does not connect.
 */
static int test_pair(struct pair *p)
{
	bool xrc = p->b.type == IBV_QPT_XRC_RECV;
	int ret;

	test_unconnected(p);
	ret = connect_pair(p, 7, MIN_RNR_TIMER);
	report(p, ret, "%s: connect", p->name);
	if (ret)
		return -1;
	report(p, query_caps(&p->a, IBV_QPS_RTS), "%s: query_qp in RTS",
	       p->name);

	test_opcodes(p);
	test_inline(p);
	test_sges(p);
	test_atomics(p);

	report(p, unsignaled_pair(p),
	       "%s: an unsignaled WR completes without a CQE", p->name);
	recover(p, "unsignaled");
	report(p, unsignaled_stream(p), "%s: every 16th WR signaled, "
	       "SQ wraps 4 times", p->name);
	recover(p, "unsignaled");

	report(p, event_next(p), "%s: completion event, any completion",
	       p->name);
	recover(p, "event");
	report(p, event_solicited(p),
	       "%s: completion event, solicited only", p->name);
	recover(p, "event");
	report(p, event_send_cq(p),
	       "%s: completion event on the send CQ, once per arming",
	       p->name);
	recover(p, "event");
	if (xrc)
		report(p, reset_keeps_srq_cqes(p), "%s: RESET drops the "
		       "XRC_SEND QP's unpolled CQEs, not the SRQ's", p->name);
	else
		report(p, reset_drops_cqes(p),
		       "%s: RESET drops the QP's unpolled CQEs (spec §9)",
		       p->name);
	recover(p, "RESET");

	test_rejections(p);
	test_errors(p);
	report(p, empty_poll_is_free(p),
	       "%s: empty poll_cq costs no syscall and no doorbell", p->name);
	if (xrc)
		test_xrc(p);
	return 0;
}

/* Both devices offer XRC; else say which does not. */
static bool xrc_offered(const struct dev *da, const struct dev *db)
{
	const struct dev *d = !(da->attr.device_cap_flags & IBV_DEVICE_XRC) ?
			      da : db;

	if (d->attr.device_cap_flags & IBV_DEVICE_XRC)
		return true;
	printf("# %s has no IBV_DEVICE_XRC: XRC not checked\n", d->name);
	return false;
}

int main(int argc, char **argv)
{
	const char *dev_a = NULL, *dev_b = NULL, *host = NULL;
	int gid_a = -1, gid_b = -1, port = AGENT_PORT, opt, ret;
	const char *mode = "rc";
	struct dev da = {}, db = {};
	struct agent agent = { .fd = -1 };
	struct pair p = {};
	bool serve = false, xrc_mode = false;

	while ((opt = getopt(argc, argv, "d:D:g:G:t:c:p:PsvX")) != -1) {
		switch (opt) {
		case 'd':
			dev_a = optarg;
			break;
		case 'D':
			dev_b = optarg;
			break;
		case 'g':
			gid_a = atoi(optarg);
			break;
		case 'G':
			gid_b = atoi(optarg);
			break;
		case 't':
			timeout_ms = atoi(optarg) * 1000;
			break;
		case 'c':
			host = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 'P':
			cq_poll_doorbells = true;
			break;
		case 's':
			serve = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'X':
			xrc_mode = true;
			mode = "xrc";
			break;
		default:
			usage(argv[0]);
		}
	}
	if (port < 1 || port > 65535 || timeout_ms <= 0 || optind < argc)
		usage(argv[0]);
	if (serve) {
		if (dev_a || dev_b || host || xrc_mode)
			usage(argv[0]);
		return run_agent(port);
	}
	if (!dev_a)
		usage(argv[0]);
	if (!dev_b)
		dev_b = dev_a;
	if (!host && gid_b < 0 && !strcmp(dev_a, dev_b))
		gid_b = gid_a;

	ret = dev_open(&da, dev_a, gid_a);
	if (!ret && host) {
		ret = agent_connect(&agent, host, port);
		if (!ret)
			ret = dev_open_remote(&db, &agent, dev_b, gid_b);
	} else if (!ret) {
		ret = dev_open(&db, dev_b, gid_b);
	}
	if (!ret) {
		set_path(&da, &db);
		native_peer = db.attr.vendor_id != PVRDMA_VENDOR_ID;
		src_qp_required = xrc_mode && !native_peer;
		if (native_peer)
			printf("# responder %s is not a pvrdma device (vendor "
			       "%#x): rules its own provider or device decides "
			       "are not judged\n", db.name,
			       db.attr.vendor_id);
		printf("# requester %s GID index %d, responder %s GID index "
		       "%d, MTU %d, rd_atomic %u, timeout %d s%s\n", da.name,
		       da.gid_index, db.name, db.gid_index,
		       128 << path_mtu, rd_atomic, timeout_ms / 1000,
		       xrc_mode ? ", XRC" : "");
		if (xrc_mode && !xrc_offered(&da, &db))
			goto teardown;
		ret = pair_create(&p, mode, &da, &db, NULL, 0, xrc_mode);
	}
	report(NULL, ret, xrc_mode ? "xrc: setup" : "setup");
	if (!ret && !test_pair(&p) && !xrc_mode)
		test_srq(&da, &db);

teardown:
	ret = side_destroy(&p.a);
	ret |= side_destroy(&p.b);
	report(NULL, ret, "%s: teardown", mode);
	dev_close(&da);
	if (db.remote || db.ctx)
		dev_close(&db);
	else if (host)
		agent_lost(&agent);
	printf("RESULT passed=%d failed=%d\n", nr_pass, nr_fail);
	return nr_fail ? 1 : 0;
}
