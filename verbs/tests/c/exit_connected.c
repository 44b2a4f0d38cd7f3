/* A process that exits with its connection open, and its peer, which must
 * hear of it: as the kernel resets the connections of a process that
 * exits, so must uwarp's TCP in the process itself.
 *
 *   exit_connected server ADDRESS PORT   accepts one connection, prints
 *                                        "connected" and exits without
 *                                        cleaning anything up
 *   exit_connected client ADDRESS PORT   connects, then waits up to 30 s
 *                                        for DISCONNECTED; "ok" and 0
 *                                        when it came
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "check.h"

/* A queue pair for `id`, on a new domain and completion queue. */
static void make_qp(struct rdma_cm_id *id)
{
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	CHECK(pd != NULL && cq != NULL);
	struct ibv_qp_init_attr attr = rc_qp_attr(cq, 4);
	CHECK(rdma_create_qp(id, pd, &attr) == 0);
}

static void serve(struct rdma_event_channel *ch, struct rdma_addrinfo *res)
{
	struct rdma_cm_id *listener;
	CHECK(rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(listener, res->ai_src_addr) == 0);
	CHECK(rdma_listen(listener, 1) == 0);
	struct rdma_cm_event *event = NULL;
	CHECK(rdma_get_cm_event(ch, &event) == 0);
	CHECK(event->event == RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *child = event->id;
	rdma_ack_cm_event(event);
	make_qp(child);
	CHECK(rdma_accept(child, NULL) == 0);
	expect_cm_event(ch, RDMA_CM_EVENT_ESTABLISHED, 30000);
	printf("connected\n");
	/* No disconnect, no destruction: the exit must end the connection. */
	exit(failures ? 1 : 0);
}

static int connect_and_wait(struct rdma_event_channel *ch, struct rdma_addrinfo *res)
{
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(id, NULL, res->ai_dst_addr, 2000) == 0);
	expect_cm_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
	CHECK(rdma_resolve_route(id, 2000) == 0);
	expect_cm_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000);
	make_qp(id);
	struct rdma_conn_param param;
	memset(&param, 0, sizeof(param));
	CHECK(rdma_connect(id, &param) == 0);
	expect_cm_event(ch, RDMA_CM_EVENT_ESTABLISHED, 30000);
	expect_cm_event(ch, RDMA_CM_EVENT_DISCONNECTED, 30000);
	return finish();
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: exit_connected server|client ADDRESS PORT\n");
		return 2;
	}
	int server = strcmp(argv[1], "server") == 0;
	struct rdma_addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_flags = server ? RAI_PASSIVE : 0;
	CHECK(rdma_getaddrinfo(argv[2], argv[3], &hints, &res) == 0);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch != NULL);
	if (res == NULL || ch == NULL)
		return 1;
	if (server)
		serve(ch, res);
	return connect_and_wait(ch, res);
}
