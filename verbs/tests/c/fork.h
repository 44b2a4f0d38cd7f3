/* What the fork_*.c programs share (with check.h): a listener on the
 * loopback, the monotonic clock in seconds, and the check that a child
 * ended well. */
#ifndef UWARP_VERBS_TEST_FORK_H
#define UWARP_VERBS_TEST_FORK_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"

/* An id on `ch` (NULL: synchronous) listening on 127.0.0.1 at a port
 * the system chooses; its address goes to *bound. */
static inline struct rdma_cm_id *loopback_listener(struct rdma_event_channel *ch,
						   struct sockaddr_in *bound)
{
	struct rdma_cm_id *listener = NULL;
	CHECK(rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) == 0);
	memset(bound, 0, sizeof(*bound));
	bound->sin_family = AF_INET;
	bound->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(rdma_bind_addr(listener, (struct sockaddr *)bound) == 0);
	CHECK(rdma_listen(listener, 8) == 0);
	bound->sin_port = rdma_get_src_port(listener);
	CHECK(bound->sin_port != 0);
	return listener;
}

/* Seconds on the monotonic clock. */
static inline double seconds(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec + now.tv_nsec / 1e9;
}

/* Waits for `child`, which must exit with 0 (its checks all held). */
static inline void expect_child_succeeded(pid_t child)
{
	int status = 0;
	CHECK(waitpid(child, &status, 0) == child);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fprintf(stderr, "the child ended with status %#x\n", status);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

#endif
