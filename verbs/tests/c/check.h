/* What the C test programs share: CHECK(cond) prints the condition and
 * errno when it fails and counts the failure; finish() ends main with
 * "ok" and 0 when every check held, 1 otherwise; rc_qp_attr() describes
 * the queue pair they make; expect_cm_event() waits for a connection
 * manager event of a given type. */
#ifndef UWARP_VERBS_TEST_CHECK_H
#define UWARP_VERBS_TEST_CHECK_H

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static int failures;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: failed: %s (errno %d)\n",  \
				__FILE__, __LINE__, #cond, errno);         \
			failures++;                                        \
		}                                                          \
	} while (0)

/* The RDMA device's context, as librdmacm's ids have it (the first of
 * rdma_get_devices, kept): a listener bound to the loopback address has
 * none of its own (Linux's RDMA CM acquires no device for a loopback
 * bind), so the tests allocate their domains and queues on this one.
 * Called before a fork, it gives the child the parent's. */
static inline struct ibv_context *cm_context(void)
{
	static struct ibv_context *context;
	if (!context) {
		struct ibv_context **list = rdma_get_devices(NULL);
		if (list) {
			context = list[0];
			rdma_free_devices(list);
		}
		if (!context) {
			fprintf(stderr, "no RDMA device: errno %d\n", errno);
			exit(2);
		}
	}
	return context;
}

static int finish(void)
{
	if (failures)
		return 1;
	printf("ok\n");
	return 0;
}

/* A reliable-connected queue pair completing on `cq` both ways, `depth`
 * work requests deep each way, one scatter/gather element each. */
static inline struct ibv_qp_init_attr rc_qp_attr(struct ibv_cq *cq, uint32_t depth)
{
	struct ibv_qp_init_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.send_cq = cq;
	attr.recv_cq = cq;
	attr.qp_type = IBV_QPT_RC;
	attr.cap.max_send_wr = depth;
	attr.cap.max_recv_wr = depth;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	return attr;
}

/* The next event on the channel, which must be of type `type`;
 * acknowledged. The channel's descriptor is polled for at most
 * `timeout_ms` first. */
static inline void expect_cm_event(struct rdma_event_channel *ch, int type, int timeout_ms)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	if (poll(&pfd, 1, timeout_ms) != 1) {
		fprintf(stderr, "no %s within %d ms\n", rdma_event_str(type), timeout_ms);
		exit(2);
	}
	struct rdma_cm_event *event = NULL;
	if (rdma_get_cm_event(ch, &event)) {
		fprintf(stderr, "rdma_get_cm_event: errno %d\n", errno);
		exit(2);
	}
	if (event->event != type) {
		fprintf(stderr, "expected %s, got %s (status %d)\n",
			rdma_event_str(type), rdma_event_str(event->event), event->status);
		exit(2);
	}
	rdma_ack_cm_event(event);
}

#endif
