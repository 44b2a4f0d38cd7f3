/* Asynchronous events: a server whose connections a hostile peer drives
 * into the error state, one connection per expected event.
 *
 *   async_events PORT EVENT...   listens on 127.0.0.1:PORT and, for each
 *                                EVENT (access, fatal), accepts one
 *                                connection and waits up to 20 s for the
 *                                context's async_fd to become readable;
 *                                the event must be that type and name the
 *                                connection's queue pair; prints "accepted"
 *                                once it is established and "served" once
 *                                it is gone (the next peer waits for that),
 *                                then "ok" and 0 when every check held.
 *
 * Also checked: a non-blocking async_fd with nothing queued answers
 * EAGAIN; DISCONNECTED follows the event; destroying the queue pair
 * waits until the event is acknowledged (another thread acknowledges it
 * 200 ms later). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#include "check.h"

struct late_ack {
	struct ibv_async_event *event;
	volatile int acknowledged;
};

/* Acknowledges the event 200 ms from now, saying so first. */
static void *acknowledge_late(void *arg)
{
	struct late_ack *ack = arg;
	usleep(200 * 1000);
	ack->acknowledged = 1;
	ibv_ack_async_event(ack->event);
	return NULL;
}

static int event_type(const char *name)
{
	if (strcmp(name, "access") == 0)
		return IBV_EVENT_QP_ACCESS_ERR;
	if (strcmp(name, "fatal") == 0)
		return IBV_EVENT_QP_FATAL;
	fprintf(stderr, "unknown event %s\n", name);
	exit(2);
}

/* Accepts the next connection on `listener` and checks that `expected`
 * is raised for its queue pair. */
static void serve_one(struct rdma_event_channel *ch, int expected)
{
	struct rdma_cm_event *event = NULL;
	CHECK(rdma_get_cm_event(ch, &event) == 0);
	CHECK(event->event == RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *child = event->id;
	rdma_ack_cm_event(event);
	struct ibv_pd *pd = ibv_alloc_pd(child->verbs);
	struct ibv_cq *cq = ibv_create_cq(child->verbs, 16, NULL, NULL, 0);
	CHECK(pd != NULL && cq != NULL);
	struct ibv_qp_init_attr attr = rc_qp_attr(cq, 4);
	CHECK(rdma_create_qp(child, pd, &attr) == 0);
	char buffer[64];
	struct ibv_mr *mr = ibv_reg_mr(pd, buffer, sizeof(buffer), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	struct ibv_sge sge = { .addr = (uintptr_t)buffer, .length = sizeof(buffer), .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(child->qp, &wr, &bad) == 0);

	int fd = child->verbs->async_fd;
	int flags = fcntl(fd, F_GETFL);
	CHECK(fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0);
	struct ibv_async_event async;
	errno = 0;
	CHECK(ibv_get_async_event(child->verbs, &async) == -1 && errno == EAGAIN);

	CHECK(rdma_accept(child, NULL) == 0);
	expect_cm_event(ch, RDMA_CM_EVENT_ESTABLISHED, 20000);
	printf("accepted\n");
	fflush(stdout);

	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 20000) == 1);
	CHECK(ibv_get_async_event(child->verbs, &async) == 0);
	CHECK(fcntl(fd, F_SETFL, flags) == 0);
	if (async.event_type != (enum ibv_event_type)expected)
		fprintf(stderr, "got %s, expected %s\n", ibv_event_type_str(async.event_type),
			ibv_event_type_str(expected));
	CHECK(async.event_type == (enum ibv_event_type)expected);
	CHECK(async.element.qp == child->qp);
	expect_cm_event(ch, RDMA_CM_EVENT_DISCONNECTED, 20000);

	struct late_ack ack = { .event = &async, .acknowledged = 0 };
	pthread_t thread;
	CHECK(pthread_create(&thread, NULL, acknowledge_late, &ack) == 0);
	rdma_destroy_qp(child);
	CHECK(ack.acknowledged == 1);
	pthread_join(thread, NULL);

	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(rdma_destroy_id(child) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	printf("served\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: async_events PORT access|fatal...\n");
		return 2;
	}
	struct rdma_addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_flags = RAI_PASSIVE;
	CHECK(rdma_getaddrinfo("127.0.0.1", argv[1], &hints, &res) == 0);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch != NULL);
	if (res == NULL || ch == NULL)
		return 1;
	struct rdma_cm_id *listener;
	CHECK(rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(listener, res->ai_src_addr) == 0);
	CHECK(rdma_listen(listener, 1) == 0);
	for (int i = 2; i < argc; i++)
		serve_one(ch, event_type(argv[i]));
	CHECK(rdma_destroy_id(listener) == 0);
	rdma_destroy_event_channel(ch);
	rdma_freeaddrinfo(res);
	return finish();
}
