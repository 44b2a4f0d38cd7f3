/* Row 11 of issue 38: the child of a process whose device is open opens
 * a device of its own, as a child may under rdma-core. The parent opens
 * its device (an event channel, a listener, a domain and a queue) and
 * forks; the child, with nothing of the parent's, resolves, connects to
 * the parent's listener and exchanges one Send each way with it over
 * loopback, then disconnects. Both are bounded by alarm(). Prints "ok"
 * (the parent) when every check held in both. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "fork.h"

#define MESSAGE_SIZE 32
static const char from_child[MESSAGE_SIZE] = "from the child";
static const char from_parent[MESSAGE_SIZE] = "from the parent";

/* The next event on `ch`, which must be `type`; returned unacknowledged.
 * Exits 2 when none comes within 10 s. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int type)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *event = NULL;
	if (poll(&pfd, 1, 10000) != 1 || rdma_get_cm_event(ch, &event)) {
		fprintf(stderr, "no %s (errno %d)\n", rdma_event_str(type), errno);
		exit(2);
	}
	if (event->event != type) {
		fprintf(stderr, "expected %s, got %s (status %d)\n", rdma_event_str(type),
			rdma_event_str(event->event), event->status);
		exit(2);
	}
	return event;
}

/* Polls `cq` for one completion of `opcode`, at most 10 s. */
static void expect_completion(struct ibv_cq *cq, enum ibv_wc_opcode opcode)
{
	time_t deadline = time(NULL) + 10;
	struct ibv_wc wc;
	int n;
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && time(NULL) < deadline)
		;
	CHECK(n == 1);
	if (n == 1) {
		CHECK(wc.status == IBV_WC_SUCCESS);
		CHECK(wc.opcode == opcode);
	}
}

/* Posts a receive of MESSAGE_SIZE octets into `buf`. */
static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, char *buf)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = MESSAGE_SIZE, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad = NULL;
	CHECK(ibv_post_recv(qp, &wr, &bad) == 0);
}

/* Sends the MESSAGE_SIZE octets of `buf`, signalled. */
static void post_send(struct ibv_qp *qp, struct ibv_mr *mr, char *buf)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = MESSAGE_SIZE, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad = NULL;
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
}

/* The child: a device of its own, a connection to the parent's
 * listener at `listening`, a Send each way. Exits 0 when every check
 * held. */
static void child_connects(struct sockaddr_in *listening)
{
	alarm(20);
	struct rdma_cm_id *id = NULL;
	CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)listening, 2000) == 0);
	CHECK(rdma_resolve_route(id, 2000) == 0);
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	CHECK(pd != NULL && cq != NULL);
	static char buf[2 * MESSAGE_SIZE];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	struct ibv_qp_init_attr attr = rc_qp_attr(cq, 4);
	CHECK(rdma_create_qp(id, pd, &attr) == 0);
	if (failures)
		exit(1);
	post_recv(id->qp, mr, buf + MESSAGE_SIZE);
	CHECK(rdma_connect(id, NULL) == 0);
	memcpy(buf, from_child, MESSAGE_SIZE);
	post_send(id->qp, mr, buf);
	expect_completion(cq, IBV_WC_SEND);
	expect_completion(cq, IBV_WC_RECV);
	CHECK(memcmp(buf + MESSAGE_SIZE, from_parent, MESSAGE_SIZE) == 0);
	CHECK(rdma_disconnect(id) == 0);
	exit(failures ? 1 : 0);
}

int main(void)
{
	alarm(30);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch != NULL);
	struct sockaddr_in listening;
	struct rdma_cm_id *listener = loopback_listener(ch, &listening);
	struct ibv_pd *pd = ibv_alloc_pd(cm_context());
	struct ibv_cq *cq = ibv_create_cq(cm_context(), 8, NULL, NULL, 0);
	static char buf[2 * MESSAGE_SIZE];
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	CHECK(pd != NULL && cq != NULL && mr != NULL);
	if (failures)
		return finish();

	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0)
		child_connects(&listening);

	struct rdma_cm_event *request = next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *id = request->id;
	rdma_ack_cm_event(request);
	struct ibv_qp_init_attr attr = rc_qp_attr(cq, 4);
	CHECK(rdma_create_qp(id, pd, &attr) == 0);
	post_recv(id->qp, mr, buf + MESSAGE_SIZE);
	CHECK(rdma_accept(id, NULL) == 0);
	rdma_ack_cm_event(next_event(ch, RDMA_CM_EVENT_ESTABLISHED));
	expect_completion(cq, IBV_WC_RECV);
	CHECK(memcmp(buf + MESSAGE_SIZE, from_child, MESSAGE_SIZE) == 0);
	memcpy(buf, from_parent, MESSAGE_SIZE);
	post_send(id->qp, mr, buf);
	expect_completion(cq, IBV_WC_SEND);
	rdma_ack_cm_event(next_event(ch, RDMA_CM_EVENT_DISCONNECTED));

	expect_child_succeeded(child);

	rdma_destroy_qp(id);
	CHECK(rdma_destroy_id(id) == 0);
	CHECK(rdma_destroy_id(listener) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	rdma_destroy_event_channel(ch);
	return finish();
}
