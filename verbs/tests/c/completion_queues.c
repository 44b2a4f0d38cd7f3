/* Completion channels and queues through the installed headers, run on
 * uwarp's libibverbs.so.1 by uwarp-run: creation and its errors, the
 * channel's descriptor (non-blocking: EAGAIN; a signal without
 * SA_RESTART: EINTR), a thread blocked in ibv_get_cq_event cancelled
 * with pthread_cancel as rping does (the program must live on), and the
 * inline poll and arm of an empty queue. "ok" and 0 when all hold. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "check.h"

static void *wait_for_event(void *arg)
{
	struct ibv_comp_channel *channel = arg;
	struct ibv_cq *cq;
	void *cq_context;
	ibv_get_cq_event(channel, &cq, &cq_context);
	return NULL;
}

static void on_alarm(int sig) { (void)sig; }

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	CHECK(ctx != NULL);
	if (!ctx)
		return 1;

	struct ibv_comp_channel *channel = ibv_create_comp_channel(ctx);
	CHECK(channel != NULL && channel->context == ctx && channel->fd >= 0);

	errno = 0;
	CHECK(ibv_create_cq(ctx, 0, NULL, NULL, 0) == NULL && errno == EINVAL);
	errno = 0;
	CHECK(ibv_create_cq(ctx, 16, NULL, NULL, 1) == NULL && errno == EINVAL);

	int marker;
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, &marker, channel, 0);
	CHECK(cq != NULL);
	if (!cq)
		return 1;
	CHECK(cq->cqe >= 64 && cq->channel == channel && cq->cq_context == &marker);
	CHECK(ibv_destroy_comp_channel(channel) == EBUSY);

	/* An empty queue: nothing to poll; arming succeeds. */
	struct ibv_wc wc[4];
	CHECK(ibv_poll_cq(cq, 4, wc) == 0);
	CHECK(ibv_req_notify_cq(cq, 0) == 0);
	CHECK(ibv_req_notify_cq(cq, 1) == 0);

	/* Non-blocking: no event yet. */
	int flags = fcntl(channel->fd, F_GETFL);
	CHECK(fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) == 0);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	errno = 0;
	CHECK(ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == -1 && errno == EAGAIN);
	CHECK(fcntl(channel->fd, F_SETFL, flags) == 0);

	/* Blocking, interrupted by a signal whose handler has no SA_RESTART
	 * (qperf ends its tests so). */
	struct sigaction action;
	memset(&action, 0, sizeof(action));
	action.sa_handler = on_alarm;
	CHECK(sigaction(SIGALRM, &action, NULL) == 0);
	alarm(1);
	errno = 0;
	CHECK(ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == -1 && errno == EINTR);

	/* Blocking, in a thread that another cancels (rping's shutdown). */
	pthread_t waiter;
	CHECK(pthread_create(&waiter, NULL, wait_for_event, channel) == 0);
	usleep(100 * 1000);
	CHECK(pthread_cancel(waiter) == 0);
	void *result = NULL;
	CHECK(pthread_join(waiter, &result) == 0);
	CHECK(result == PTHREAD_CANCELED);

	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_destroy_comp_channel(channel) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	return finish();
}
