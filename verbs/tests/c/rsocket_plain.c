/* A plain sockets program (no rsocket call), for librspreload.so: a
 * listener and a client thread in one process; the client sends 256 KiB
 * of a pattern and closes, the server polls, reads and checks it all, then
 * reads end of file. With `1` as second argument it also checks that the
 * accepted socket is an rsocket (SOL_RDMA's RDMA_SQSIZE answers, which a
 * kernel socket refuses). Then a datagram each way between two UDP
 * sockets, which stay the kernel's under librspreload.so (iWARP has no
 * datagram service: rsocket answers ENOSYS for them, and the preload
 * library falls back to a kernel socket); with `1`, SOL_RDMA must be
 * refused on them. Usage: rsocket_plain PORT 0|1. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <rdma/rsocket.h>
#include "check.h"

#define TOTAL (256 * 1024)

static struct sockaddr_in addr = { .sin_family = AF_INET };

static unsigned char pattern(size_t at)
{
	return (unsigned char)(at * 13 + (at >> 11));
}

static void *client(void *unused)
{
	static unsigned char buf[TOTAL];
	size_t at, sent = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)unused;
	CHECK(fd >= 0);
	CHECK(connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	for (at = 0; at < TOTAL; at++)
		buf[at] = pattern(at);
	while (sent < TOTAL) {
		ssize_t n = send(fd, buf + sent, TOTAL - sent, 0);
		if (n <= 0)
			break;
		sent += n;
	}
	CHECK(sent == TOTAL);
	CHECK(close(fd) == 0);
	return NULL;
}

/* A datagram from a UDP socket at PORT + 1 to one at PORT + 2 and back,
 * on the loopback address. */
static void udp_exchange(int must_be_kernel)
{
	struct sockaddr_in a = addr, b = addr, from;
	socklen_t from_len = sizeof(from);
	int depth, fa = socket(AF_INET, SOCK_DGRAM, 0), fb = socket(AF_INET, SOCK_DGRAM, 0);
	socklen_t len = sizeof(depth);
	char buf[16];

	CHECK(fa >= 0 && fb >= 0);
	if (must_be_kernel) {
		errno = 0;
		CHECK(getsockopt(fa, SOL_RDMA, RDMA_SQSIZE, &depth, &len) == -1);
	}
	a.sin_port = htons(ntohs(addr.sin_port) + 1);
	b.sin_port = htons(ntohs(addr.sin_port) + 2);
	CHECK(bind(fa, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(bind(fb, (struct sockaddr *)&b, sizeof(b)) == 0);
	CHECK(sendto(fa, "ping", 4, 0, (struct sockaddr *)&b, sizeof(b)) == 4);
	CHECK(recvfrom(fb, buf, sizeof(buf), 0, (struct sockaddr *)&from, &from_len) == 4 &&
	      memcmp(buf, "ping", 4) == 0 && from.sin_port == a.sin_port);
	CHECK(sendto(fb, "pong", 4, 0, (struct sockaddr *)&from, from_len) == 4);
	CHECK(recv(fa, buf, sizeof(buf), 0) == 4 && memcmp(buf, "pong", 4) == 0);
	CHECK(close(fa) == 0);
	CHECK(close(fb) == 0);
}

int main(int argc, char **argv)
{
	static unsigned char buf[TOTAL];
	struct pollfd pfd;
	pthread_t thread;
	size_t at, got = 0;
	int listener, fd, one = 1, depth = 0;
	socklen_t len = sizeof(depth);

	alarm(60);
	signal(SIGPIPE, SIG_IGN);
	if (argc != 3)
		return 2;
	addr.sin_port = htons(atoi(argv[1]));
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

	listener = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(listener >= 0);
	CHECK(setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0);
	CHECK(bind(listener, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	CHECK(listen(listener, 4) == 0);
	pthread_create(&thread, NULL, client, NULL);
	fd = accept(listener, NULL, NULL);
	CHECK(fd >= 0);
	if (atoi(argv[2]))
		CHECK(getsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &depth, &len) == 0 && depth > 0);
	while (got < TOTAL) {
		ssize_t n;

		pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 10000) != 1)
			break;
		n = recv(fd, buf + got, TOTAL - got, 0);
		if (n <= 0)
			break;
		got += n;
	}
	CHECK(got == TOTAL);
	for (at = 0; at < got; at++)
		if (buf[at] != pattern(at))
			break;
	CHECK(at == TOTAL);
	pthread_join(thread, NULL);
	CHECK(recv(fd, buf, 16, 0) == 0);
	CHECK(close(fd) == 0);
	CHECK(close(listener) == 0);
	udp_exchange(atoi(argv[2]));
	return finish();
}
