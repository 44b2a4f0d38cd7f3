/* Row 11 of issue 38: in the child of a process whose device is open,
 * the parent's objects fail at once with ENODEV (their device is not in
 * this process: its threads did not survive the fork) instead of
 * waiting for ever, and the parent's own connection setup is untouched
 * by the child. The parent holds a connection request (a thread of its
 * own connects to its listener) and an unconnected client id with a
 * queue pair, and forks. The child accepts the request, connects the
 * client and posts on the client's queue pair: each answers within a
 * second with ENODEV; it destroys the client (0). Then the parent accepts
 * the request and its thread's connect completes. Prints "ok" when every
 * check held in both. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "fork.h"

/* How long a call on a parent's object may take in the child. */
#define ANSWERED_WITHIN 1.0

/* Checks that `call` answered within ANSWERED_WITHIN since `start`. */
#define CHECK_PROMPT(what, start)                                                  \
	do {                                                                       \
		double waited = seconds() - (start);                               \
		if (waited >= ANSWERED_WITHIN)                                     \
			fprintf(stderr, "%s took %.3f s\n", what, waited);         \
		CHECK(waited < ANSWERED_WITHIN);                                   \
	} while (0)

static struct sockaddr_in listening;
static struct ibv_pd *pd;
static struct ibv_cq *cq;

/* A synchronous client id resolved to the listener, with a queue pair. */
static struct rdma_cm_id *resolved_client(void)
{
	struct rdma_cm_id *id = NULL;
	CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&listening, 2000) == 0);
	CHECK(rdma_resolve_route(id, 2000) == 0);
	struct ibv_qp_init_attr attr = rc_qp_attr(cq, 4);
	CHECK(rdma_create_qp(id, pd, &attr) == 0);
	return id;
}

/* The parent's thread: connects a client of its own; returns whether
 * the connect succeeded. */
static void *connect_own_client(void *arg)
{
	struct rdma_cm_id *id = arg;
	return (void *)(uintptr_t)(rdma_connect(id, NULL) == 0);
}

/* The child: every call on the parent's objects answers at once. */
static void child_uses_parents_objects(struct rdma_cm_id *listener, struct rdma_cm_id *request,
				       struct rdma_cm_id *client)
{
	alarm(10);
	double start = seconds();
	errno = 0;
	CHECK(rdma_accept(request, NULL) == -1 && errno == ENODEV);
	CHECK_PROMPT("rdma_accept", start);

	start = seconds();
	errno = 0;
	CHECK(rdma_connect(client, NULL) == -1 && errno == ENODEV);
	CHECK_PROMPT("rdma_connect", start);

	static char buf[16];
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = 0 };
	struct ibv_send_wr send = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				    .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad_send = NULL;
	CHECK(ibv_post_send(client->qp, &send, &bad_send) == ENODEV && bad_send == &send);
	struct ibv_recv_wr recv = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad_recv = NULL;
	CHECK(ibv_post_recv(client->qp, &recv, &bad_recv) == ENODEV && bad_recv == &recv);

	start = seconds();
	rdma_destroy_qp(client);
	CHECK(rdma_destroy_id(client) == 0);
	CHECK_PROMPT("rdma_destroy_id", start);

	/* The parent's listening id, once the request it handed out (which
	 * counts against it) is gone: its thread is the parent's, not
	 * joined. */
	start = seconds();
	rdma_destroy_qp(request);
	CHECK(rdma_destroy_id(request) == 0);
	CHECK(rdma_destroy_id(listener) == 0);
	CHECK_PROMPT("rdma_destroy_id of a listener", start);
	exit(failures ? 1 : 0);
}

int main(void)
{
	alarm(30);
	struct rdma_cm_id *listener = loopback_listener(NULL, &listening);
	pd = ibv_alloc_pd(cm_context());
	cq = ibv_create_cq(cm_context(), 16, NULL, NULL, 0);
	CHECK(pd != NULL && cq != NULL);
	if (failures)
		return finish();

	struct rdma_cm_id *own_client = resolved_client();
	pthread_t connecting;
	CHECK(pthread_create(&connecting, NULL, connect_own_client, own_client) == 0);
	struct rdma_cm_id *request = NULL;
	CHECK(rdma_get_request(listener, &request) == 0);
	struct ibv_qp_init_attr attr = rc_qp_attr(cq, 4);
	CHECK(rdma_create_qp(request, pd, &attr) == 0);
	struct rdma_cm_id *client = resolved_client();
	if (failures)
		return finish();

	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0)
		child_uses_parents_objects(listener, request, client);
	expect_child_succeeded(child);

	CHECK(rdma_accept(request, NULL) == 0);
	void *connected = NULL;
	CHECK(pthread_join(connecting, &connected) == 0 && connected);
	CHECK(rdma_disconnect(own_client) == 0);
	rdma_destroy_qp(own_client);
	rdma_destroy_qp(request);
	rdma_destroy_qp(client);
	CHECK(rdma_destroy_id(own_client) == 0);
	CHECK(rdma_destroy_id(request) == 0);
	CHECK(rdma_destroy_id(client) == 0);
	CHECK(rdma_destroy_id(listener) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	return finish();
}
