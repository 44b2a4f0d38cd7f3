/* Destroying queue pairs and the queues they use, on uwarp's drop-in
 * libraries, in one process over loopback, one part per run:
 *
 *   established  ibv_destroy_qp of an established queue pair with
 *                receives posted, on a completion queue another queue
 *                pair shares: nothing of it appears in the queue after
 *                the call returns, and the peer sees the connection end
 *                (DISCONNECTED);
 *   connecting   ibv_destroy_qp of a queue pair whose rdma_connect waits
 *                for the server: the connection the server then accepts
 *                ends at once;
 *   in-use       ibv_destroy_cq of a queue a queue pair completes on,
 *                ibv_destroy_srq of a queue a queue pair takes receives
 *                from: EBUSY, and the queue stays usable; both go once
 *                the queue pair is destroyed.
 *
 * "ok" and 0 when every check holds. */
#include "ql_pair.h"

/* Posts eight receives, numbered 1 to 8. */
static void post_eight(struct ibv_qp *qp)
{
	for (uint64_t id = 1; id <= 8; id++)
		CHECK(ql_post_recv(qp, id) == 0);
}

/* Reads the client side's events (whatever the destroyed queue pair's
 * connection did) for up to `ms`, acknowledging them. */
static void drain_events(struct rdma_event_channel *ch, int ms)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *event;
	while (poll(&pfd, 1, ms) == 1 && rdma_get_cm_event(ch, &event) == 0)
		rdma_ack_cm_event(event);
}

/* Checks that nothing of queue pair `qp_num` reaches `cq` for 500 ms. */
static void expect_nothing_of(struct ibv_cq *cq, uint32_t qp_num)
{
	struct ibv_wc wc;
	for (int waited = 0; waited < 500; waited++) {
		while (ibv_poll_cq(cq, 1, &wc) == 1) {
			if (wc.qp_num == qp_num)
				fprintf(stderr, "wr_id %llu (%s) of the destroyed queue pair\n",
					(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
			CHECK(wc.qp_num != qp_num);
		}
		usleep(1000);
	}
}

static void destroy_established(struct ql_pair *p)
{
	struct ibv_cq *shared = ibv_create_cq(cm_context(), 64, NULL, NULL, 0);
	struct ibv_cq *server_cq = ibv_create_cq(cm_context(), 64, NULL, NULL, 0);
	CHECK(shared != NULL && server_cq != NULL);
	/* Another queue pair completes on the shared queue. */
	struct ibv_qp_init_attr other_attr = ql_attr(shared, shared, 1, 1);
	struct ibv_qp *other = ibv_create_qp(p->pd, &other_attr);
	CHECK(other != NULL);
	struct rdma_cm_id *server;
	struct rdma_cm_id *client = ql_connect(p, ql_attr(shared, shared, 4, 8),
					       ql_attr(server_cq, server_cq, 4, 8), post_eight,
					       &server);
	uint32_t qp_num = client->qp->qp_num;
	rdma_destroy_qp(client);
	expect_nothing_of(shared, qp_num);
	expect_cm_event(p->server_ch, RDMA_CM_EVENT_DISCONNECTED, QL_WAIT_MS);
	for (uint64_t id = 1; id <= 8; id++)
		QL_FLUSHED(server_cq, id);
	drain_events(p->client_ch, 200);
	ql_destroy_pair(client, server);
	CHECK(ibv_destroy_qp(other) == 0);
	CHECK(ibv_destroy_cq(shared) == 0 && ibv_destroy_cq(server_cq) == 0);
}

static void destroy_while_connecting(struct ql_pair *p)
{
	struct ibv_cq *client_cq = ibv_create_cq(cm_context(), 16, NULL, NULL, 0);
	struct ibv_cq *server_cq = ibv_create_cq(cm_context(), 16, NULL, NULL, 0);
	CHECK(client_cq != NULL && server_cq != NULL);
	struct rdma_cm_id *client = ql_client(p);
	struct ibv_qp_init_attr client_attr = ql_attr(client_cq, client_cq, 2, 2);
	CHECK(rdma_create_qp(client, p->pd, &client_attr) == 0);
	CHECK(ql_post_recv(client->qp, 1) == 0);
	uint32_t qp_num = client->qp->qp_num;
	CHECK(rdma_connect(client, NULL) == 0);
	struct rdma_cm_id *server = ql_request(p);
	/* rdma_connect waits for the answer: the queue pair goes now. */
	rdma_destroy_qp(client);
	struct ibv_qp_init_attr server_attr = ql_attr(server_cq, server_cq, 2, 2);
	CHECK(rdma_create_qp(server, p->pd, &server_attr) == 0);
	CHECK(ql_post_recv(server->qp, 2) == 0);
	CHECK(rdma_accept(server, NULL) == 0);
	expect_cm_event(p->server_ch, RDMA_CM_EVENT_ESTABLISHED, QL_WAIT_MS);
	expect_cm_event(p->server_ch, RDMA_CM_EVENT_DISCONNECTED, QL_WAIT_MS);
	QL_FLUSHED(server_cq, 2);
	expect_nothing_of(client_cq, qp_num);
	drain_events(p->client_ch, 200);
	ql_destroy_pair(client, server);
	CHECK(ibv_destroy_cq(client_cq) == 0 && ibv_destroy_cq(server_cq) == 0);
}

static void destroy_queues_in_use(struct ql_pair *p)
{
	struct ibv_comp_channel *channel = ibv_create_comp_channel(cm_context());
	CHECK(channel != NULL);
	struct ibv_cq *send_cq = ibv_create_cq(cm_context(), 16, NULL, channel, 0);
	struct ibv_cq *recv_cq = ibv_create_cq(cm_context(), 16, NULL, NULL, 0);
	struct ibv_srq_init_attr srq_attr = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(p->pd, &srq_attr);
	CHECK(send_cq != NULL && recv_cq != NULL && srq != NULL);
	struct ibv_qp_init_attr attr = ql_attr(send_cq, recv_cq, 2, 2);
	attr.srq = srq;
	struct ibv_qp *qp = ibv_create_qp(p->pd, &attr);
	CHECK(qp != NULL);
	CHECK(ibv_destroy_cq(send_cq) == EBUSY);
	CHECK(ibv_destroy_cq(recv_cq) == EBUSY);
	CHECK(ibv_destroy_srq(srq) == EBUSY);
	CHECK(ibv_destroy_comp_channel(channel) == EBUSY);
	/* Still usable: the SRQ takes a receive, and the queue pair's flush
	 * reaches its send queue, armed, through the channel. */
	struct ibv_recv_wr wr = { .wr_id = 7 }, *bad = NULL;
	CHECK(ibv_post_srq_recv(srq, &wr, &bad) == 0);
	CHECK(ibv_req_notify_cq(send_cq, 0) == 0);
	CHECK(ql_post_send(qp, 8, 1) == 0);
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(qp, &err, IBV_QP_STATE) == 0);
	struct ibv_cq *event_cq;
	void *event_context;
	CHECK(ibv_get_cq_event(channel, &event_cq, &event_context) == 0 && event_cq == send_cq);
	ibv_ack_cq_events(send_cq, 1);
	QL_FLUSHED(send_cq, 8);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
	CHECK(ibv_destroy_cq(send_cq) == 0 && ibv_destroy_cq(recv_cq) == 0);
	CHECK(ibv_destroy_comp_channel(channel) == 0);
}

QL_MAIN({ "established", destroy_established }, { "connecting", destroy_while_connecting },
	{ "in-use", destroy_queues_in_use })
