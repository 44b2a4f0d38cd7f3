/* What the queue-lifecycle programs (ql_*.c) share: queue pairs joined
 * over loopback by the connection manager in one process (a listener and
 * its children on one event channel, the clients on another, so each
 * side reads its own events in order), waiting for a completion with a
 * deadline, queue pair attributes with separate depths each way, and a
 * main that runs the part of the program its argument names. */
#ifndef UWARP_VERBS_TEST_QL_PAIR_H
#define UWARP_VERBS_TEST_QL_PAIR_H

#include <unistd.h>
#include <arpa/inet.h>

#include "check.h"

/* How long any wait for an event or a completion may take. */
#define QL_WAIT_MS 10000

struct ql_pair {
	struct rdma_event_channel *server_ch, *client_ch;
	struct rdma_cm_id *listener;
	struct sockaddr_in addr;
	struct ibv_pd *pd;
};

/* A listener on an ephemeral loopback port, and a domain. */
static inline void ql_listen(struct ql_pair *p)
{
	p->server_ch = rdma_create_event_channel();
	p->client_ch = rdma_create_event_channel();
	if (!p->server_ch || !p->client_ch ||
	    rdma_create_id(p->server_ch, &p->listener, NULL, RDMA_PS_TCP)) {
		fprintf(stderr, "no event channels or listener: errno %d\n", errno);
		exit(2);
	}
	memset(&p->addr, 0, sizeof(p->addr));
	p->addr.sin_family = AF_INET;
	p->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rdma_bind_addr(p->listener, (struct sockaddr *)&p->addr) ||
	    rdma_listen(p->listener, 8)) {
		fprintf(stderr, "cannot listen: errno %d\n", errno);
		exit(2);
	}
	p->addr.sin_port = rdma_get_src_port(p->listener);
	p->pd = ibv_alloc_pd(cm_context());
	CHECK(p->pd != NULL);
}

/* A client id resolved to the listener. */
static inline struct rdma_cm_id *ql_client(struct ql_pair *p)
{
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(p->client_ch, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&p->addr, 2000) == 0);
	expect_cm_event(p->client_ch, RDMA_CM_EVENT_ADDR_RESOLVED, QL_WAIT_MS);
	CHECK(rdma_resolve_route(id, 2000) == 0);
	expect_cm_event(p->client_ch, RDMA_CM_EVENT_ROUTE_RESOLVED, QL_WAIT_MS);
	return id;
}

/* The next connection request on the listener: its new id. */
static inline struct rdma_cm_id *ql_request(struct ql_pair *p)
{
	struct pollfd pfd = { .fd = p->server_ch->fd, .events = POLLIN };
	struct rdma_cm_event *event = NULL;
	if (poll(&pfd, 1, QL_WAIT_MS) != 1 || rdma_get_cm_event(p->server_ch, &event) ||
	    event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		fprintf(stderr, "no connection request\n");
		exit(2);
	}
	struct rdma_cm_id *child = event->id;
	rdma_ack_cm_event(event);
	return child;
}

/* Reliable-connected queue pair attributes: `send_cq` and `recv_cq`,
 * `send_wr` and `recv_wr` deep, one scatter/gather element each. */
static inline struct ibv_qp_init_attr ql_attr(struct ibv_cq *send_cq, struct ibv_cq *recv_cq,
				       uint32_t send_wr, uint32_t recv_wr)
{
	struct ibv_qp_init_attr attr = rc_qp_attr(send_cq, 1);
	attr.recv_cq = recv_cq;
	attr.cap.max_send_wr = send_wr;
	attr.cap.max_recv_wr = recv_wr;
	return attr;
}

/* Connects a client with queue pair `client_attr` to the listener, which
 * accepts with `server_attr`; `prepare` (if not NULL) runs on both queue
 * pairs before the connection. Returns the client; the server's id goes
 * to `*server`. */
static inline struct rdma_cm_id *ql_connect(struct ql_pair *p, struct ibv_qp_init_attr client_attr,
				     struct ibv_qp_init_attr server_attr,
				     void (*prepare)(struct ibv_qp *), struct rdma_cm_id **server)
{
	struct rdma_cm_id *client = ql_client(p);
	CHECK(rdma_create_qp(client, p->pd, &client_attr) == 0);
	if (prepare)
		prepare(client->qp);
	CHECK(rdma_connect(client, NULL) == 0);
	*server = ql_request(p);
	CHECK(rdma_create_qp(*server, p->pd, &server_attr) == 0);
	if (prepare)
		prepare((*server)->qp);
	CHECK(rdma_accept(*server, NULL) == 0);
	expect_cm_event(p->server_ch, RDMA_CM_EVENT_ESTABLISHED, QL_WAIT_MS);
	expect_cm_event(p->client_ch, RDMA_CM_EVENT_ESTABLISHED, QL_WAIT_MS);
	return client;
}

/* Destroys a connected pair's queue pairs and ids. */
static inline void ql_destroy_pair(struct rdma_cm_id *client, struct rdma_cm_id *server)
{
	rdma_destroy_qp(client);
	rdma_destroy_qp(server);
	CHECK(rdma_destroy_id(client) == 0 && rdma_destroy_id(server) == 0);
}

/* A send and a receive completion queue, apart. */
struct ql_queues {
	struct ibv_cq *send, *recv;
};

static inline struct ql_queues ql_queues(struct ql_pair *p)
{
	struct ql_queues q = {
		ibv_create_cq(cm_context(), 64, NULL, NULL, 0),
		ibv_create_cq(cm_context(), 64, NULL, NULL, 0),
	};
	CHECK(q.send != NULL && q.recv != NULL);
	return q;
}

static inline void ql_destroy_queues(struct ql_queues q)
{
	CHECK(ibv_destroy_cq(q.send) == 0 && ibv_destroy_cq(q.recv) == 0);
}

/* Waits up to `ms` for a completion on `cq`: 1 with it in `*wc`, or 0. */
static inline int ql_poll(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	for (int waited = 0; waited <= ms; waited++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n != 0)
			return n == 1;
		usleep(1000);
	}
	return 0;
}

/* Checks that the next completion on `cq` comes in time, for `wr_id`,
 * with `status`. */
static inline void ql_expect(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, int line)
{
	struct ibv_wc wc;
	if (!ql_poll(cq, &wc, QL_WAIT_MS)) {
		fprintf(stderr, "line %d: no completion for wr_id %llu\n", line,
			(unsigned long long)wr_id);
		failures++;
		return;
	}
	if (wc.wr_id != wr_id || wc.status != status) {
		fprintf(stderr, "line %d: wr_id %llu status %s, expected %llu %s\n", line,
			(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
			(unsigned long long)wr_id, ibv_wc_status_str(status));
		failures++;
	}
}

#define QL_EXPECT(cq, wr_id, status) ql_expect(cq, wr_id, status, __LINE__)
#define QL_FLUSHED(cq, wr_id) ql_expect(cq, wr_id, IBV_WC_WR_FLUSH_ERR, __LINE__)

/* Posts one receive `wr_id` with no buffer; returns ibv_post_recv's answer. */
static inline int ql_post_recv(struct ibv_qp *qp, uint64_t wr_id)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id }, *bad = NULL;
	return ibv_post_recv(qp, &wr, &bad);
}

/* Posts one zero-length Send `wr_id`, signaled or not. */
static inline int ql_post_send(struct ibv_qp *qp, uint64_t wr_id, int signaled)
{
	struct ibv_send_wr wr = { .wr_id = wr_id, .opcode = IBV_WR_SEND }, *bad = NULL;
	wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
	return ibv_post_send(qp, &wr, &bad);
}

/* A part of a program, run by name. */
struct ql_part {
	const char *name;
	void (*run)(struct ql_pair *);
};

/* Runs the part `argv[1]` names among `parts` (at most 60 s), with a
 * listener and a domain made for it: "ok" and 0 when every check held. */
static inline int ql_main(int argc, char **argv, const struct ql_part *parts, size_t count)
{
	alarm(60);
	for (size_t i = 0; argc == 2 && i < count; i++) {
		if (strcmp(argv[1], parts[i].name) != 0)
			continue;
		struct ql_pair p;
		ql_listen(&p);
		parts[i].run(&p);
		CHECK(rdma_destroy_id(p.listener) == 0);
		CHECK(ibv_dealloc_pd(p.pd) == 0);
		return finish();
	}
	fprintf(stderr, "usage: %s PART (%s", argv[0], parts[0].name);
	for (size_t i = 1; i < count; i++)
		fprintf(stderr, ", %s", parts[i].name);
	fprintf(stderr, ")\n");
	return 2;
}

#define QL_MAIN(...)                                                              \
	int main(int argc, char **argv)                                           \
	{                                                                         \
		static const struct ql_part parts[] = { __VA_ARGS__ };            \
		return ql_main(argc, argv, parts, sizeof(parts) / sizeof(parts[0])); \
	}

#endif
