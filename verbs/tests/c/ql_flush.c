/* Every work request completes: flushed (IBV_WC_WR_FLUSH_ERR, with its
 * wr_id, sends on the send CQ and receives on the receive CQ, in posting
 * order, signaled or not) when its queue pair is in the error state and
 * nothing will carry it, as the kernel's verbs flush. On uwarp's drop-in
 * libraries, in one process over loopback, one part per run:
 *
 *   never-connected  a queue pair moved to IBV_QPS_ERR with work posted,
 *                    and work posted to it afterwards;
 *   disconnect       work posted after a graceful disconnect, at once and
 *                    seconds later;
 *   terminate        work posted after a Terminate (a Send the peer had no
 *                    receive for);
 *   rejection        receives posted before a connection the server
 *                    rejects.
 *
 * "ok" and 0 when every check holds. */
#include "ql_pair.h"

/* Posts a receive, an unsignaled Send and a signaled one, numbered from
 * `first`, and checks that each completes flushed on its own queue. */
static void expect_posts_flushed(struct ibv_qp *qp, struct ql_queues q, uint64_t first)
{
	CHECK(ql_post_recv(qp, first) == 0);
	CHECK(ql_post_send(qp, first + 1, 0) == 0);
	CHECK(ql_post_send(qp, first + 2, 1) == 0);
	QL_FLUSHED(q.recv, first);
	QL_FLUSHED(q.send, first + 1);
	QL_FLUSHED(q.send, first + 2);
}

/* A queue pair made by ibv_create_qp and never connected. */
static void never_connected(struct ql_pair *p)
{
	struct ql_queues q = ql_queues(p);
	struct ibv_qp_init_attr attr = ql_attr(q.send, q.recv, 2, 5);
	struct ibv_qp *qp = ibv_create_qp(p->pd, &attr);
	CHECK(qp != NULL);
	for (uint64_t id = 1; id <= 5; id++)
		CHECK(ql_post_recv(qp, id) == 0);
	CHECK(ql_post_send(qp, 11, 0) == 0);
	CHECK(ql_post_send(qp, 12, 1) == 0);
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(qp, &err, IBV_QP_STATE) == 0);
	for (uint64_t id = 1; id <= 5; id++)
		QL_FLUSHED(q.recv, id);
	QL_FLUSHED(q.send, 11);
	QL_FLUSHED(q.send, 12);
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(q.recv, 1, &wc) == 0 && ibv_poll_cq(q.send, 1, &wc) == 0);
	expect_posts_flushed(qp, q, 21);
	struct ibv_qp_attr got;
	struct ibv_qp_init_attr init;
	CHECK(ibv_query_qp(qp, &got, IBV_QP_STATE, &init) == 0 && got.qp_state == IBV_QPS_ERR);
	CHECK(ibv_destroy_qp(qp) == 0);
	ql_destroy_queues(q);
}

/* A connected pair, each side on queues of its own. */
struct connected {
	struct rdma_cm_id *client, *server;
	struct ql_queues client_q, server_q;
};

static struct connected connect_pair(struct ql_pair *p)
{
	struct connected c = { .client_q = ql_queues(p), .server_q = ql_queues(p) };
	c.client = ql_connect(p, ql_attr(c.client_q.send, c.client_q.recv, 4, 4),
			      ql_attr(c.server_q.send, c.server_q.recv, 4, 4), NULL, &c.server);
	return c;
}

/* Waits for both sides' DISCONNECTED, then checks that work posted on
 * each side, numbered from `first`, is flushed. */
static void expect_ended(struct ql_pair *p, struct connected c, uint64_t first)
{
	expect_cm_event(p->client_ch, RDMA_CM_EVENT_DISCONNECTED, QL_WAIT_MS);
	expect_cm_event(p->server_ch, RDMA_CM_EVENT_DISCONNECTED, QL_WAIT_MS);
	expect_posts_flushed(c.client->qp, c.client_q, first);
	expect_posts_flushed(c.server->qp, c.server_q, first + 10);
}

static void close_pair(struct connected c)
{
	ql_destroy_pair(c.client, c.server);
	ql_destroy_queues(c.client_q);
	ql_destroy_queues(c.server_q);
}

/* Work posted after a graceful disconnect, at once and once the
 * connection has surely been let go. */
static void after_disconnect(struct ql_pair *p)
{
	struct connected c = connect_pair(p);
	CHECK(rdma_disconnect(c.client) == 0);
	expect_ended(p, c, 100);
	sleep(3);
	expect_posts_flushed(c.client->qp, c.client_q, 300);
	expect_posts_flushed(c.server->qp, c.server_q, 400);
	close_pair(c);
}

/* A Send the server has no receive for: the server answers with a
 * Terminate, and afterwards work on both sides is flushed. */
static void after_terminate(struct ql_pair *p)
{
	struct connected c = connect_pair(p);
	CHECK(ql_post_send(c.client->qp, 1, 1) == 0);
	struct ibv_wc wc;
	CHECK(ql_poll(c.client_q.send, &wc, QL_WAIT_MS) && wc.wr_id == 1);
	expect_ended(p, c, 10);
	close_pair(c);
}

/* Receives posted before a connection that is rejected. */
static void after_rejection(struct ql_pair *p)
{
	struct ql_queues q = ql_queues(p);
	struct rdma_cm_id *client = ql_client(p);
	struct ibv_qp_init_attr attr = ql_attr(q.send, q.recv, 2, 3);
	CHECK(rdma_create_qp(client, p->pd, &attr) == 0);
	for (uint64_t id = 1; id <= 3; id++)
		CHECK(ql_post_recv(client->qp, id) == 0);
	CHECK(rdma_connect(client, NULL) == 0);
	struct rdma_cm_id *child = ql_request(p);
	CHECK(rdma_reject(child, NULL, 0) == 0);
	expect_cm_event(p->client_ch, RDMA_CM_EVENT_REJECTED, QL_WAIT_MS);
	for (uint64_t id = 1; id <= 3; id++)
		QL_FLUSHED(q.recv, id);
	expect_posts_flushed(client->qp, q, 4);
	rdma_destroy_qp(client);
	CHECK(rdma_destroy_id(client) == 0 && rdma_destroy_id(child) == 0);
	ql_destroy_queues(q);
}

QL_MAIN({ "never-connected", never_connected }, { "disconnect", after_disconnect },
	{ "terminate", after_terminate }, { "rejection", after_rejection })
