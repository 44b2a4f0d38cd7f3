/* rsockets across fork: a child's calls on its parent's connected
 * rsocket fail (-1, ENODEV: the connection is the parent's, as rdma-core's
 * verbs objects are) without disturbing it, and the parent's connection
 * carries data afterwards. Usage: rsocket_fork PORT. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/rsocket.h>
#include "check.h"

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	int listener, client, server, status = -1;
	char buf[16];
	pid_t child;

	alarm(60);
	if (argc != 2)
		return 2;
	addr.sin_port = htons(atoi(argv[1]));
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listener = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(listener >= 0);
	CHECK(rbind(listener, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	CHECK(rlisten(listener, 1) == 0);
	client = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(client >= 0);
	CHECK(rconnect(client, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	server = raccept(listener, NULL, NULL);
	CHECK(server >= 0);

	fflush(stdout);
	child = fork();
	if (child == 0) {
		errno = 0;
		CHECK(rsend(client, "kid", 3, MSG_DONTWAIT) == -1 && errno == ENODEV);
		_exit(failures ? 1 : 0);
	}
	CHECK(child > 0);
	CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);

	CHECK(rsend(client, "dad", 3, 0) == 3);
	CHECK(rrecv(server, buf, sizeof(buf), 0) == 3 && memcmp(buf, "dad", 3) == 0);
	CHECK(rclose(client) == 0);
	CHECK(rclose(server) == 0);
	CHECK(rclose(listener) == 0);
	return finish();
}
