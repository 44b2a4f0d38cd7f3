/* cm_loopback_bind: binds an id to 127.0.0.1 and says whether the bind
 * gave the id a device (id->verbs): "loopback device" or "loopback none",
 * then "ok". A bind that fails prints its errno and exits 1. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include "check.h"

static const char *bound(struct rdma_event_channel *ch, uint32_t addr)
{
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(addr) };
	if (rdma_bind_addr(id, (struct sockaddr *)&sin)) {
		printf("bind errno %d\n", errno);
		exit(1);
	}
	const char *device = id->verbs ? "device" : "none";
	CHECK(rdma_destroy_id(id) == 0);
	return device;
}

int main(void)
{
	alarm(30);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch != NULL);
	printf("loopback %s\n", bound(ch, INADDR_LOOPBACK));
	rdma_destroy_event_channel(ch);
	return finish();
}
