/* Listeners of both address families at one port, as tgt's iSER target
 * opens them (0.0.0.0 then [::], from getaddrinfo(AI_PASSIVE)): an IPv6
 * id with RDMA_OPTION_ID_AFONLY shares the port with the IPv4 one, and
 * each takes its own family's connections; without the option the IPv6
 * listener takes both families, so the port is in use, as with the
 * kernel's connection manager. "ok" and 0 when every check held. */
#include <unistd.h>

#include "cm.h"

static struct ibv_pd *pd;
static struct ibv_cq *cq;

/* Connects a client on `ch` to `dst`, accepts it on the listener whose
 * request comes (which must be `listener`), and tears both down. */
static void connect_through(struct rdma_event_channel *ch, struct sockaddr *dst,
			    struct rdma_cm_id *listener)
{
	struct rdma_cm_id *client;
	CHECK(rdma_create_id(ch, &client, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(client, NULL, dst, 2000) == 0);
	if (failures)
		exit(finish());
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, client));
	CHECK(rdma_resolve_route(client, 2000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, client));
	make_qp(client, pd, cq);
	CHECK(rdma_connect(client, NULL) == 0);
	struct rdma_cm_event *request = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	CHECK(request->listen_id == listener);
	struct rdma_cm_id *child = request->id;
	CHECK(rdma_get_peer_addr(child)->sa_family == dst->sa_family);
	rdma_ack_cm_event(request);
	make_qp(child, pd, cq);
	CHECK(rdma_accept(child, NULL) == 0);
	expect_both(ch, RDMA_CM_EVENT_ESTABLISHED);
	disconnect_pair(ch, client, child);
}

/* A new id on `ch` with AFONLY set to `only` (-1: not set). */
static struct rdma_cm_id *v6_id(struct rdma_event_channel *ch, int only)
{
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	if (only >= 0)
		CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &only,
				      sizeof(only)) == 0);
	return id;
}

int main(void)
{
	alarm(60);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *v4;
	CHECK(rdma_create_id(ch, &v4, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in any4 = loopback(0);
	any4.sin_addr.s_addr = htonl(INADDR_ANY);
	CHECK(rdma_bind_addr(v4, (struct sockaddr *)&any4) == 0);
	uint16_t port = ntohs(rdma_get_src_port(v4));
	CHECK(rdma_listen(v4, 8) == 0);
	pd = ibv_alloc_pd(v4->verbs);
	cq = ibv_create_cq(v4->verbs, 64, NULL, NULL, 0);
	CHECK(pd != NULL && cq != NULL);

	struct sockaddr_in6 any6;
	memset(&any6, 0, sizeof(any6));
	any6.sin6_family = AF_INET6;
	any6.sin6_addr = in6addr_any;
	any6.sin6_port = htons(port);

	/* A wrong option size is refused. */
	struct rdma_cm_id *probe = v6_id(ch, -1);
	char one = 1;
	errno = 0;
	CHECK(rdma_set_option(probe, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, 1) == -1 &&
	      errno == EINVAL);
	/* Without AFONLY (or with it off) the IPv6 listener would take IPv4
	 * connections too: the port is in use. */
	errno = 0;
	CHECK(rdma_bind_addr(probe, (struct sockaddr *)&any6) == -1 && errno == EADDRINUSE);
	CHECK(rdma_destroy_id(probe) == 0);
	probe = v6_id(ch, 0);
	errno = 0;
	CHECK(rdma_bind_addr(probe, (struct sockaddr *)&any6) == -1 && errno == EADDRINUSE);
	CHECK(rdma_destroy_id(probe) == 0);

	/* With AFONLY the families share the port. */
	struct rdma_cm_id *v6 = v6_id(ch, 1);
	CHECK(rdma_bind_addr(v6, (struct sockaddr *)&any6) == 0);
	CHECK(ntohs(rdma_get_src_port(v6)) == port);
	CHECK(rdma_listen(v6, 8) == 0);

	struct sockaddr_in to4 = loopback(port);
	connect_through(ch, (struct sockaddr *)&to4, v4);
	struct sockaddr_in6 to6 = any6;
	to6.sin6_addr = in6addr_loopback;
	connect_through(ch, (struct sockaddr *)&to6, v6);

	CHECK(rdma_destroy_id(v6) == 0);
	CHECK(rdma_destroy_id(v4) == 0);
	rdma_destroy_event_channel(ch);
	return finish();
}
