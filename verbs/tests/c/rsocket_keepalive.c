/* SO_KEEPALIVE on an rsocket: the client turns keepalive on with
 * TCP_KEEPIDLE seconds (0: keepalive stays off), connects to a server in
 * the same process, and then neither side makes a call for IDLE_MS. Over
 * uwarp's socket transport the connection is a kernel TCP socket: the
 * data segments it sends meanwhile (`ss`'s data_segs_out) are the
 * keepalive messages. Prints "keepalive segments N", then exchanges a
 * message each way (the connection still works after the keepalives),
 * and "ok".
 * Usage: rsocket_keepalive PORT TCP_KEEPIDLE. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>
#include <rdma/rsocket.h>
#include "check.h"

#define IDLE_MS 3500

/* data_segs_out of the kernel TCP socket connected to 127.0.0.1:PORT
 * (0 when ss prints none: it leaves zero counters out). */
static long data_segs_out(const char *port)
{
	char command[128], line[4096];
	long segments = 0;

	snprintf(command, sizeof(command),
		 "ss -tinH state established dst 127.0.0.1:%s", port);
	FILE *ss = popen(command, "r");
	CHECK(ss != NULL);
	if (!ss)
		return -1;
	while (fgets(line, sizeof(line), ss)) {
		char *field = strstr(line, "data_segs_out:");
		if (field)
			segments = atol(field + strlen("data_segs_out:"));
	}
	CHECK(pclose(ss) == 0);
	return segments;
}

static void set_int(int fd, int level, int name, int value)
{
	CHECK(rsetsockopt(fd, level, name, &value, sizeof(value)) == 0);
}

static int get_int(int fd, int level, int name)
{
	int value = -1;
	socklen_t len = sizeof(value);

	CHECK(rgetsockopt(fd, level, name, &value, &len) == 0 && len == sizeof(value));
	return value;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	int listener, client, server, idle;
	char buf[2];

	alarm(60);
	if (argc != 3)
		return 2;
	idle = atoi(argv[2]);
	addr.sin_port = htons(atoi(argv[1]));
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listener = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(listener >= 0);
	set_int(listener, SOL_SOCKET, SO_REUSEADDR, 1);
	CHECK(rbind(listener, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	CHECK(rlisten(listener, 4) == 0);

	client = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(client >= 0);
	if (idle > 0) {
		/* As rdma-core: TCP_KEEPIDLE reads 0 until set or keepalive
		 * is turned on, then the kernel's tcp_keepalive_time. */
		CHECK(get_int(client, IPPROTO_TCP, TCP_KEEPIDLE) == 0);
		set_int(client, SOL_SOCKET, SO_KEEPALIVE, 1);
		CHECK(get_int(client, SOL_SOCKET, SO_KEEPALIVE) == 1);
		CHECK(get_int(client, IPPROTO_TCP, TCP_KEEPIDLE) > 0);
		set_int(client, IPPROTO_TCP, TCP_KEEPIDLE, idle);
		CHECK(get_int(client, IPPROTO_TCP, TCP_KEEPIDLE) == idle);
		errno = 0;
		CHECK(rsetsockopt(client, IPPROTO_TCP, TCP_KEEPIDLE, &(int){ 0 }, sizeof(int)) == -1 &&
		      errno == EINVAL);
	}
	CHECK(rconnect(client, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	server = raccept(listener, NULL, NULL);
	CHECK(server >= 0);

	long before = data_segs_out(argv[1]);
	usleep(IDLE_MS * 1000);
	long after = data_segs_out(argv[1]);
	printf("keepalive segments %ld\n", after - before);

	CHECK(rsend(client, "k", 1, 0) == 1);
	CHECK(rrecv(server, buf, 1, MSG_WAITALL) == 1 && buf[0] == 'k');
	CHECK(rsend(server, "s", 1, 0) == 1);
	CHECK(rrecv(client, buf, 1, MSG_WAITALL) == 1 && buf[0] == 's');
	CHECK(rclose(client) == 0);
	CHECK(rclose(server) == 0);
	CHECK(rclose(listener) == 0);
	return finish();
}
