/* Row 11 of issue 38, on the DPDK transport: a child of a process whose
 * device runs on DPDK cannot start an EAL of its own, nor use its
 * parent's (the EAL's threads are not in it), so opening a device fails
 * at once with ENODEV; the parent's ids fail the same way. The child is
 * bounded by alarm(). Prints "ok" (the parent) when every check held in
 * both. Run with uwarp-run --transport dpdk. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "fork.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fork_dpdk ADDRESS (the port's)\n");
		return 2;
	}
	alarm(30);
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	CHECK(inet_pton(AF_INET, argv[1], &sin.sin_addr) == 1);
	struct rdma_cm_id *listener = NULL;
	CHECK(rdma_create_id(NULL, &listener, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)&sin) == 0);
	CHECK(rdma_listen(listener, 8) == 0);
	if (failures)
		return finish();

	fflush(stderr);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		alarm(10);
		struct rdma_cm_id *id = NULL;
		CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0);
		errno = 0;
		CHECK(rdma_bind_addr(id, (struct sockaddr *)&sin) == -1 && errno == ENODEV);
		errno = 0;
		CHECK(ibv_alloc_pd(listener->verbs) == NULL && errno == ENODEV);
		exit(failures ? 1 : 0);
	}
	expect_child_succeeded(child);
	CHECK(rdma_destroy_id(listener) == 0);
	return finish();
}
