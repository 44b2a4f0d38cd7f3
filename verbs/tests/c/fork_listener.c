/* Row 11 of issue 38: a listener destroyed by a process that forked
 * after opening it must close its port, as the kernel's connection
 * manager does: the child's copies of the library's sockets must not
 * keep it open. The parent listens, forks a child that only waits (and
 * calls nothing of RDMA), destroys its listener, then connects to the
 * port twice: with a plain TCP socket and with rdma_connect. Both must
 * be refused at once (the child still alive), not accepted by the
 * child's copy of the listening socket and left waiting 10 s for an MPA
 * Reply. Prints "ok" when every check held. */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fork.h"

/* How long a refused connection may take: the loopback answers a SYN
 * to a closed port with a RST within microseconds. */
#define REFUSED_WITHIN 1.0

int main(void)
{
	alarm(60);
	struct sockaddr_in sin;
	struct rdma_cm_id *listener = loopback_listener(NULL, &sin);

	/* The child holds whatever it inherited until the parent is done. */
	int hold[2];
	CHECK(pipe(hold) == 0);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		close(hold[1]);
		char done;
		while (read(hold[0], &done, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(hold[0]);

	CHECK(rdma_destroy_id(listener) == 0);

	int s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0);
	double start = seconds();
	CHECK(connect(s, (struct sockaddr *)&sin, sizeof(sin)) == -1 && errno == ECONNREFUSED);
	CHECK(seconds() - start < REFUSED_WITHIN);
	close(s);

	struct rdma_cm_id *client = NULL;
	CHECK(rdma_create_id(NULL, &client, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(client, NULL, (struct sockaddr *)&sin, 2000) == 0);
	CHECK(rdma_resolve_route(client, 2000) == 0);
	struct ibv_pd *pd = ibv_alloc_pd(client->verbs);
	struct ibv_cq *cq = ibv_create_cq(client->verbs, 8, NULL, NULL, 0);
	CHECK(pd != NULL && cq != NULL);
	struct ibv_qp_init_attr attr = rc_qp_attr(cq, 4);
	CHECK(rdma_create_qp(client, pd, &attr) == 0);
	start = seconds();
	CHECK(rdma_connect(client, NULL) == -1 && errno == ECONNREFUSED);
	double waited = seconds() - start;
	if (waited >= REFUSED_WITHIN)
		fprintf(stderr, "rdma_connect took %.3f s\n", waited);
	CHECK(waited < REFUSED_WITHIN);

	rdma_destroy_qp(client);
	CHECK(rdma_destroy_id(client) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);

	close(hold[1]);
	expect_child_succeeded(child);
	return finish();
}
