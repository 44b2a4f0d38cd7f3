/* A program that forks before its first RDMA call (as servers do): the
 * child opens the device, makes a domain, a queue, a queue pair, a memory
 * region and a listener, tells its port and exits without cleaning up;
 * then the parent does the same on that port, which the child's exit must
 * have freed, and cleans up. Prints "ok" when every check held. */
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* Uses the device; listens on `port` (0: any), returned in *bound.
 * Cleans up when `clean`. */
static void use_device(int clean, unsigned short port, unsigned short *bound)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list != NULL && n == 1);
	if (!list || n < 1)
		return;
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx != NULL);
	if (!ctx)
		return;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd != NULL && cq != NULL);
	struct ibv_qp_init_attr attr = rc_qp_attr(cq, 4);
	struct ibv_qp *qp = ibv_create_qp(pd, &attr);
	static char buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(qp != NULL && mr != NULL);

	struct rdma_cm_id *listener = NULL;
	CHECK(rdma_create_id(NULL, &listener, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&sin) == 0);
	CHECK(rdma_listen(listener, 1) == 0);
	*bound = ntohs(rdma_get_src_port(listener));
	CHECK(*bound != 0 && (port == 0 || *bound == port));
	if (!clean)
		return;
	CHECK(rdma_destroy_id(listener) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	ibv_free_device_list(list);
}

int main(void)
{
	int told[2];
	CHECK(pipe(told) == 0);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		unsigned short port = 0;
		use_device(0, 0, &port);
		if (write(told[1], &port, sizeof(port)) != sizeof(port))
			failures++;
		exit(failures ? 1 : 0); /* nothing destroyed */
	}
	unsigned short port = 0;
	CHECK(read(told[0], &port, sizeof(port)) == sizeof(port) && port != 0);
	int status = 0;
	CHECK(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	unsigned short again = 0;
	use_device(1, port, &again);
	return finish();
}
