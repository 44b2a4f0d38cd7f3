/* The connection manager through the installed <rdma/rdma_cma.h>, run on
 * uwarp's librdmacm.so.1 by uwarp-run, over loopback: an event channel,
 * a listener on an ephemeral port, address and route resolution, connect
 * and accept with private data both ways and IRD/ORD, ESTABLISHED and
 * DISCONNECTED on both sides, a rejection with private data, a refused
 * connection, and synchronous ids (NULL channel). "ok" and 0 when all
 * checks hold. */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include "cm.h"

struct sync_server {
	struct rdma_cm_id *listener;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int accepted;
};

static void *accept_sync(void *arg)
{
	struct sync_server *s = arg;
	struct rdma_cm_id *child = NULL;
	if (rdma_get_request(s->listener, &child))
		return NULL;
	make_qp(child, s->pd, s->cq);
	s->accepted = rdma_accept(child, NULL) == 0;
	return child;
}

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch != NULL && ch->fd >= 0);

	/* The listener, on a port the system chooses. */
	int marker;
	uint16_t port;
	struct rdma_cm_id *listener = loopback_listener(ch, &marker, &port);
	/* On the socket transport a loopback bind gives the device. */
	CHECK(listener->verbs == cm_context());
	struct sockaddr_in bound;
	memcpy(&bound, rdma_get_local_addr(listener), sizeof(bound));
	CHECK(bound.sin_addr.s_addr == htonl(INADDR_LOOPBACK) && ntohs(bound.sin_port) == port);
	struct sockaddr_in sin = loopback(0);

	/* rdma_getaddrinfo finds the listener's address. */
	char port_str[8];
	snprintf(port_str, sizeof(port_str), "%u", port);
	struct rdma_addrinfo *res = NULL;
	CHECK(rdma_getaddrinfo("127.0.0.1", port_str, NULL, &res) == 0);
	CHECK(res != NULL && res->ai_dst_addr != NULL &&
	      ((struct sockaddr_in *)res->ai_dst_addr)->sin_port == htons(port));
	rdma_freeaddrinfo(res);

	struct ibv_pd *pd = ibv_alloc_pd(cm_context());
	struct ibv_cq *cq = ibv_create_cq(cm_context(), 64, NULL, NULL, 0);
	CHECK(pd != NULL && cq != NULL);

	/* Connect, with private data both ways. */
	struct rdma_cm_id *client = resolved_client(ch, port);
	make_qp(client, pd, cq);
	struct rdma_conn_param param;
	memset(&param, 0, sizeof(param));
	param.private_data = "hello";
	param.private_data_len = 6;
	param.responder_resources = 4;
	param.initiator_depth = 4;
	CHECK(rdma_connect(client, &param) == 0);

	struct rdma_cm_event *request = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	CHECK(request->listen_id == listener);
	CHECK(request->id->context == &marker);
	CHECK(request->param.conn.private_data_len >= 6 &&
	      memcmp(request->param.conn.private_data, "hello", 6) == 0);
	struct rdma_cm_id *child = request->id;
	/* The request's id has the device the request came in on. */
	CHECK(child->verbs == cm_context());
	rdma_ack_cm_event(request);
	make_qp(child, pd, cq);
	memset(&param, 0, sizeof(param));
	param.private_data = "world";
	param.private_data_len = 6;
	param.responder_resources = 4;
	param.initiator_depth = 4;
	CHECK(rdma_accept(child, &param) == 0);

	int established = 0, got_reply_data = 0;
	while (established < 2) {
		struct rdma_cm_event *event = expect(ch, RDMA_CM_EVENT_ESTABLISHED, NULL);
		if (event->id == client)
			got_reply_data = event->param.conn.private_data_len >= 6 &&
				memcmp(event->param.conn.private_data, "world", 6) == 0;
		CHECK(event->id == client || event->id == child);
		established++;
		rdma_ack_cm_event(event);
	}
	CHECK(got_reply_data);
	/* rdma_notify does nothing on iWARP (tgt calls it on each connection). */
	CHECK(rdma_notify(child, IBV_EVENT_COMM_EST) == 0);
	/* No multicast on iWARP; ECE accepted, and none comes back. */
	struct sockaddr_in group = loopback(0);
	group.sin_addr.s_addr = htonl(0xe0000001);
	errno = 0;
	CHECK(rdma_join_multicast(client, (struct sockaddr *)&group, NULL) == -1 && errno == ENOSYS);
	struct ibv_ece ece = { 0x1234, 1, 0 };
	CHECK(rdma_set_local_ece(client, &ece) == 0);
	CHECK(rdma_get_remote_ece(client, &ece) == 0 && ece.vendor_id == 0 && ece.options == 0);
	CHECK(rdma_get_src_port(client) != 0);
	CHECK(ntohs(rdma_get_dst_port(client)) == port);
	struct sockaddr_in *peer = (struct sockaddr_in *)rdma_get_peer_addr(client);
	CHECK(peer->sin_family == AF_INET && ntohs(peer->sin_port) == port);

	/* A graceful disconnect reaches both sides. */
	CHECK(rdma_disconnect(client) == 0);
	int disconnected = 0;
	while (disconnected < 2) {
		struct rdma_cm_event *event = expect(ch, RDMA_CM_EVENT_DISCONNECTED, NULL);
		disconnected++;
		rdma_ack_cm_event(event);
	}
	rdma_destroy_qp(client);
	rdma_destroy_qp(child);
	CHECK(rdma_destroy_id(client) == 0);
	CHECK(rdma_destroy_id(child) == 0);

	/* A rejection carries the responder's private data. */
	client = resolved_client(ch, port);
	make_qp(client, pd, cq);
	CHECK(rdma_connect(client, NULL) == 0);
	request = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	child = request->id;
	rdma_ack_cm_event(request);
	CHECK(rdma_reject(child, "no", 3) == 0);
	struct rdma_cm_event *rejected = expect(ch, RDMA_CM_EVENT_REJECTED, client);
	CHECK(rejected->status < 0);
	CHECK(rejected->param.conn.private_data_len >= 3 &&
	      memcmp(rejected->param.conn.private_data, "no", 3) == 0);
	rdma_ack_cm_event(rejected);
	rdma_destroy_qp(client);
	CHECK(rdma_destroy_id(client) == 0);
	CHECK(rdma_destroy_id(child) == 0);

	/* Nothing listens: refused. */
	CHECK(rdma_destroy_id(listener) == 0);
	client = resolved_client(ch, port);
	make_qp(client, pd, cq);
	CHECK(rdma_connect(client, NULL) == 0);
	struct rdma_cm_event *refused = expect(ch, RDMA_CM_EVENT_REJECTED, client);
	CHECK(refused->status == -ECONNREFUSED);
	rdma_ack_cm_event(refused);
	rdma_destroy_qp(client);
	CHECK(rdma_destroy_id(client) == 0);

	/* The destroyed id again (perftest 4.5 connects again with it after a
	 * rejection): EINVAL, not a crash. */
	errno = 0;
	CHECK(rdma_resolve_addr(client, NULL, (struct sockaddr *)&sin, 2000) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(rdma_destroy_id(client) == -1 && errno == EINVAL);

	/* A destroyed event channel: destroyed again, waited on, given to a
	 * new id. */
	struct rdma_event_channel *gone = rdma_create_event_channel();
	CHECK(gone != NULL);
	rdma_destroy_event_channel(gone);
	rdma_destroy_event_channel(gone);
	struct rdma_cm_event *no_event;
	errno = 0;
	CHECK(rdma_get_cm_event(gone, &no_event) == -1 && errno == EINVAL);
	struct rdma_cm_id *orphan;
	errno = 0;
	CHECK(rdma_create_id(gone, &orphan, NULL, RDMA_PS_TCP) == -1 && errno == EINVAL);

	/* Synchronous ids: each call returns when its step is done. */
	struct sync_server server = { NULL, pd, cq, 0 };
	CHECK(rdma_create_id(NULL, &server.listener, NULL, RDMA_PS_TCP) == 0);
	sin.sin_port = 0;
	CHECK(rdma_bind_addr(server.listener, (struct sockaddr *)&sin) == 0);
	CHECK(rdma_listen(server.listener, 1) == 0);
	port = ntohs(rdma_get_src_port(server.listener));
	pthread_t thread;
	CHECK(pthread_create(&thread, NULL, accept_sync, &server) == 0);
	struct rdma_cm_id *sync_client;
	CHECK(rdma_create_id(NULL, &sync_client, NULL, RDMA_PS_TCP) == 0);
	sin.sin_port = htons(port);
	CHECK(rdma_resolve_addr(sync_client, NULL, (struct sockaddr *)&sin, 2000) == 0);
	CHECK(rdma_resolve_route(sync_client, 2000) == 0);
	make_qp(sync_client, pd, cq);
	CHECK(rdma_connect(sync_client, NULL) == 0);
	void *sync_child = NULL;
	CHECK(pthread_join(thread, &sync_child) == 0);
	CHECK(server.accepted && sync_child != NULL);
	rdma_destroy_qp(sync_client);
	rdma_destroy_qp(sync_child);
	CHECK(rdma_destroy_id(sync_client) == 0);
	CHECK(rdma_destroy_id(sync_child) == 0);
	CHECK(rdma_destroy_id(server.listener) == 0);

	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	rdma_destroy_event_channel(ch);
	return finish();
}
