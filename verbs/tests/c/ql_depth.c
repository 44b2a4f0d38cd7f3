/* Work queues hold at most their depth, as the kernel's providers do:
 * a post beyond max_send_wr, max_recv_wr or an SRQ's max_wr outstanding
 * (posted, its completion not yet in its queue) fails with ENOMEM and
 * *bad_wr naming it; a chain of work requests that loops back on itself
 * stops there. Checked on uwarp's drop-in libraries with asymmetric
 * depths (one send, five receives), one part per run:
 *
 *   queue-pair  a queue pair never connected: the depths written back,
 *               then held; once in the error state, the flushes free the
 *               slots again;
 *   loops       looping chains of receives and of sends;
 *   srq         an SRQ of three, and a looping chain on it;
 *   connected   a connected pair: a receive frees its slot once its
 *               completion is in the queue, a Send too, so posting again
 *               after each poll never fails.
 *
 * The address space is limited to 4 GiB, so that a library that does not
 * hold the depth fails the loops quickly instead of exhausting memory.
 * "ok" and 0 when every check holds. */
#include <sys/resource.h>

#include "ql_pair.h"

/* Checks that a chain `a` -> `b` -> `a` ... of receives stops with ENOMEM
 * once `depth` are posted, at the request after the last that fit. */
static void looping_receives(struct ibv_qp *qp, struct ibv_srq *srq, int depth)
{
	struct ibv_recv_wr a = { .wr_id = 1 }, b = { .wr_id = 2 }, *bad = NULL;
	a.next = &b;
	b.next = &a;
	int answer = srq ? ibv_post_srq_recv(srq, &a, &bad) : ibv_post_recv(qp, &a, &bad);
	CHECK(answer == ENOMEM);
	CHECK(bad == (depth % 2 ? &b : &a));
}

static void queue_pair(struct ql_pair *p)
{
	struct ql_queues q = ql_queues(p);
	struct ibv_qp_init_attr attr = ql_attr(q.send, q.recv, 1, 5);
	struct ibv_qp *qp = ibv_create_qp(p->pd, &attr);
	CHECK(qp != NULL);
	CHECK(attr.cap.max_send_wr == 1 && attr.cap.max_recv_wr == 5);
	struct ibv_qp_attr got;
	struct ibv_qp_init_attr init;
	CHECK(ibv_query_qp(qp, &got, 0, &init) == 0);
	CHECK(got.cap.max_send_wr == 1 && got.cap.max_recv_wr == 5);

	for (uint64_t id = 1; id <= 5; id++)
		CHECK(ql_post_recv(qp, id) == 0);
	struct ibv_recv_wr sixth = { .wr_id = 6 }, *bad_recv = NULL;
	CHECK(ibv_post_recv(qp, &sixth, &bad_recv) == ENOMEM && bad_recv == &sixth);
	CHECK(ql_post_send(qp, 11, 0) == 0);
	CHECK(ql_post_send(qp, 12, 1) == ENOMEM);

	/* The error state flushes all six; their slots are free again, and
	 * work posted now is flushed as it comes. */
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(qp, &err, IBV_QP_STATE) == 0);
	for (uint64_t id = 1; id <= 5; id++)
		QL_FLUSHED(q.recv, id);
	QL_FLUSHED(q.send, 11);
	for (uint64_t id = 21; id <= 25; id++)
		CHECK(ql_post_recv(qp, id) == 0);
	for (uint64_t id = 21; id <= 25; id++)
		QL_FLUSHED(q.recv, id);
	CHECK(ibv_destroy_qp(qp) == 0);
	ql_destroy_queues(q);
}

static void loops(struct ql_pair *p)
{
	struct ql_queues q = ql_queues(p);
	struct ibv_qp_init_attr attr = ql_attr(q.send, q.recv, 1, 5);
	struct ibv_qp *qp = ibv_create_qp(p->pd, &attr);
	CHECK(qp != NULL);
	looping_receives(qp, NULL, 5);
	struct ibv_send_wr loop = { .wr_id = 12, .opcode = IBV_WR_SEND }, *bad = NULL;
	loop.next = &loop;
	CHECK(ibv_post_send(qp, &loop, &bad) == ENOMEM && bad == &loop);
	CHECK(ibv_destroy_qp(qp) == 0);
	ql_destroy_queues(q);
}

static void srq(struct ql_pair *p)
{
	struct ibv_srq_init_attr srq_attr = { .attr = { .max_wr = 3, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(p->pd, &srq_attr);
	CHECK(srq != NULL && srq_attr.attr.max_wr == 3);
	looping_receives(NULL, srq, 3);
	struct ibv_recv_wr fourth = { .wr_id = 4 }, *bad = NULL;
	CHECK(ibv_post_srq_recv(srq, &fourth, &bad) == ENOMEM && bad == &fourth);
	CHECK(ibv_destroy_srq(srq) == 0);
}

static void connected(struct ql_pair *p)
{
	struct ql_queues q = ql_queues(p);
	struct ibv_cq *client_cq = q.send, *server_cq = q.recv;
	struct rdma_cm_id *server;
	struct rdma_cm_id *client = ql_connect(p, ql_attr(client_cq, client_cq, 1, 5),
					       ql_attr(server_cq, server_cq, 1, 5), NULL, &server);
	for (uint64_t id = 1; id <= 5; id++)
		CHECK(ql_post_recv(server->qp, id) == 0);
	CHECK(ql_post_recv(server->qp, 6) == ENOMEM);
	/* Each Send the client posts after polling the last one's completion
	 * finds its one slot free; each receive polled frees one. */
	for (uint64_t id = 1; id <= 20; id++) {
		CHECK(ql_post_send(client->qp, 100 + id, 1) == 0);
		QL_EXPECT(client_cq, 100 + id, IBV_WC_SUCCESS);
		QL_EXPECT(server_cq, id, IBV_WC_SUCCESS);
		CHECK(ql_post_recv(server->qp, id + 5) == 0);
		CHECK(ql_post_recv(server->qp, 1000) == ENOMEM);
	}
	CHECK(rdma_disconnect(client) == 0);
	expect_cm_event(p->client_ch, RDMA_CM_EVENT_DISCONNECTED, QL_WAIT_MS);
	expect_cm_event(p->server_ch, RDMA_CM_EVENT_DISCONNECTED, QL_WAIT_MS);
	for (uint64_t id = 21; id <= 25; id++)
		QL_FLUSHED(server_cq, id);
	ql_destroy_pair(client, server);
	ql_destroy_queues(q);
}

static const struct ql_part parts[] = {
	{ "queue-pair", queue_pair },
	{ "loops", loops },
	{ "srq", srq },
	{ "connected", connected },
};

int main(int argc, char **argv)
{
	struct rlimit limit = { 4ull << 30, 4ull << 30 };
	CHECK(setrlimit(RLIMIT_AS, &limit) == 0);
	return ql_main(argc, argv, parts, sizeof(parts) / sizeof(parts[0]));
}
