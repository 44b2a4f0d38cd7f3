/* An rsocket's receive queue holds what its peer may send while the
 * socket makes no call: the peer's data messages up to the credits
 * granted (RDMA_RQSIZE) and, besides them, the peer's control messages
 * (credit updates; on iWARP each is a Send that takes a receive). Here
 * the client (RDMA_RQSIZE 16, the least) makes no call while the server
 * grants it credits and a new buffer (its first call does), then sends
 * as many one-octet messages as the client granted: all must arrive and
 * the connection stay up.
 * Usage: rsocket_credits PORT. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>
#include <rdma/rsocket.h>
#include "check.h"

#define CREDITS 16

static void set_int(int fd, int level, int name, int value)
{
	CHECK(rsetsockopt(fd, level, name, &value, sizeof(value)) == 0);
}

/* A listener on the loopback address at `port`, its address in *addr. */
static int listen_at(struct sockaddr_in *addr, const char *port)
{
	int listener = rsocket(AF_INET, SOCK_STREAM, 0);

	*addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(atoi(port)) };
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(listener >= 0);
	set_int(listener, SOL_SOCKET, SO_REUSEADDR, 1);
	CHECK(rbind(listener, (struct sockaddr *)addr, sizeof(*addr)) == 0);
	CHECK(rlisten(listener, 4) == 0);
	return listener;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr;
	int listener, client, server, round;
	char buf[CREDITS];

	alarm(60);
	if (argc != 2)
		return 2;
	listener = listen_at(&addr, argv[1]);

	/* Three connections, each making the same exchange. */
	for (round = 0; round < 3; round++) {
		client = rsocket(AF_INET, SOCK_STREAM, 0);
		CHECK(client >= 0);
		set_int(client, SOL_RDMA, RDMA_RQSIZE, CREDITS);
		CHECK(rconnect(client, (struct sockaddr *)&addr, sizeof(addr)) == 0);
		server = raccept(listener, NULL, NULL);
		CHECK(server >= 0);
		/* The server's first call grants credits and a buffer. */
		errno = 0;
		CHECK(rrecv(server, buf, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
		for (int i = 0; i < CREDITS; i++)
			CHECK(rsend(server, "0123456789abcdef" + i, 1, 0) == 1);
		/* Everything lands before the client looks. */
		usleep(200 * 1000);
		CHECK(rrecv(client, buf, CREDITS, MSG_WAITALL) == CREDITS &&
		      memcmp(buf, "0123456789abcdef", CREDITS) == 0);
		CHECK(rsend(client, "ok", 2, 0) == 2);
		CHECK(rrecv(server, buf, 2, MSG_WAITALL) == 2 && memcmp(buf, "ok", 2) == 0);
		CHECK(rclose(client) == 0);
		CHECK(rclose(server) == 0);
	}
	CHECK(rclose(listener) == 0);
	return finish();
}
