/* What the C test programs share: CHECK(cond) prints the condition and
 * errno when it fails and counts the failure; finish() ends main with
 * "ok" and 0 when every check held, 1 otherwise; rc_qp_attr() describes
 * the queue pair they make. */
#ifndef UWARP_VERBS_TEST_CHECK_H
#define UWARP_VERBS_TEST_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

static int failures;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: failed: %s (errno %d)\n",  \
				__FILE__, __LINE__, #cond, errno);         \
			failures++;                                        \
		}                                                          \
	} while (0)

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

#endif
