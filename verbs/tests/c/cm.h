/* What the connection-manager test programs share: expect() takes the
 * next event of a given type; make_qp() gives an id its queue pair;
 * loopback_listener() listens on 127.0.0.1 at a port the system chooses;
 * resolved_client() makes an id resolved to such a listener. */
#ifndef UWARP_VERBS_TEST_CM_H
#define UWARP_VERBS_TEST_CM_H

#include <arpa/inet.h>
#include <netinet/in.h>

#include "check.h"

/* The next event on the channel: must be of type `type` for `id` (NULL:
 * any id); returns it unacknowledged. Exits with 2 otherwise. */
static inline struct rdma_cm_event *expect(struct rdma_event_channel *ch, int type,
					   struct rdma_cm_id *id)
{
	struct rdma_cm_event *event = NULL;
	if (rdma_get_cm_event(ch, &event)) {
		fprintf(stderr, "rdma_get_cm_event: errno %d\n", errno);
		exit(2);
	}
	if (event->event != type || (id && event->id != id)) {
		fprintf(stderr, "expected %s, got %s (status %d)\n",
			rdma_event_str(type), rdma_event_str(event->event),
			event->status);
		exit(2);
	}
	return event;
}

/* Takes and acknowledges two events of type `type` on `ch` (one for each
 * side of a connection whose ids share the channel). */
static inline void expect_both(struct rdma_event_channel *ch, int type)
{
	for (int side = 0; side < 2; side++)
		rdma_ack_cm_event(expect(ch, type, NULL));
}

/* Disconnects `client` from `child`, both on `ch`: DISCONNECTED on both
 * sides, then both queue pairs and ids destroyed. */
static inline void disconnect_pair(struct rdma_event_channel *ch, struct rdma_cm_id *client,
				   struct rdma_cm_id *child)
{
	CHECK(rdma_disconnect(client) == 0);
	expect_both(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(client);
	rdma_destroy_qp(child);
	CHECK(rdma_destroy_id(client) == 0);
	CHECK(rdma_destroy_id(child) == 0);
}

/* Gives `id` a queue pair completing on `cq`, 8 deep each way. */
static inline void make_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr attr = rc_qp_attr(cq, 8);
	CHECK(rdma_create_qp(id, pd, &attr) == 0);
	CHECK(id->qp != NULL && id->qp->qp_num != 0);
	CHECK(attr.cap.max_send_wr >= 8 && attr.cap.max_inline_data >= 4);
}

/* The loopback address at `port` (host order). */
static inline struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	return sin;
}

/* A listening id on `ch` (NULL: synchronous) at 127.0.0.1 and a port the
 * system chooses, written to *port (host order). */
static inline struct rdma_cm_id *loopback_listener(struct rdma_event_channel *ch,
						   void *context, uint16_t *port)
{
	struct rdma_cm_id *listener = NULL;
	CHECK(rdma_create_id(ch, &listener, context, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin = loopback(0);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&sin) == 0);
	*port = ntohs(rdma_get_src_port(listener));
	CHECK(*port != 0);
	CHECK(rdma_listen(listener, 8) == 0);
	return listener;
}

/* A client id on `ch` resolved to 127.0.0.1 at `port` (host order),
 * both resolutions' events taken. */
static inline struct rdma_cm_id *resolved_client(struct rdma_event_channel *ch, uint16_t port)
{
	struct rdma_cm_id *id = NULL;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin = loopback(port);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, id));
	CHECK(id->verbs != NULL);
	CHECK(rdma_resolve_route(id, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, id));
	return id;
}

#endif
