/* ibv_modify_qp and ibv_query_qp on one queue pair from many threads at
 * once, as a program's connection thread and its monitoring threads do:
 * two threads record states in turn (INIT, RTR, RTS) while two others
 * query; every answer is a state one of them recorded, and the last one
 * recorded is what a query finds afterwards. The library reads and writes
 * the recorded state atomically (a plain write under the readers' shared
 * references was undefined behaviour in Rust, whatever x86 showed).
 *
 *   ql_state threads
 *
 * "ok" and 0 when every check holds. */
#include <pthread.h>

#include "ql_pair.h"

#define ROUNDS 20000

static struct ibv_qp *qp;
static int bad_answers;

static void *record(void *arg)
{
	static const enum ibv_qp_state states[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		struct ibv_qp_attr attr = { .qp_state = states[i % 3] };
		if (ibv_modify_qp(qp, &attr, IBV_QP_STATE) != 0)
			__atomic_add_fetch(&bad_answers, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void *query(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		struct ibv_qp_attr attr;
		struct ibv_qp_init_attr init;
		int answer = ibv_query_qp(qp, &attr, IBV_QP_STATE, &init);
		if (answer != 0 || attr.qp_state < IBV_QPS_INIT || attr.qp_state > IBV_QPS_RTS)
			__atomic_add_fetch(&bad_answers, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void threads(struct ql_pair *p)
{
	struct ibv_cq *cq = ibv_create_cq(cm_context(), 16, NULL, NULL, 0);
	CHECK(cq != NULL);
	struct ibv_qp_init_attr attr = ql_attr(cq, cq, 1, 1);
	qp = ibv_create_qp(p->pd, &attr);
	CHECK(qp != NULL);
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT };
	CHECK(ibv_modify_qp(qp, &init, IBV_QP_STATE) == 0);
	pthread_t workers[4];
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&workers[i], NULL, i < 2 ? record : query, NULL) == 0);
	for (int i = 0; i < 4; i++)
		CHECK(pthread_join(workers[i], NULL) == 0);
	CHECK(bad_answers == 0);
	struct ibv_qp_attr last = { .qp_state = IBV_QPS_RTS };
	CHECK(ibv_modify_qp(qp, &last, IBV_QP_STATE) == 0);
	struct ibv_qp_attr got;
	struct ibv_qp_init_attr got_init;
	CHECK(ibv_query_qp(qp, &got, IBV_QP_STATE, &got_init) == 0 && got.qp_state == IBV_QPS_RTS);
	CHECK(qp->state == IBV_QPS_RTS);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
}

QL_MAIN({ "threads", threads })
