/* IRD and ORD through the connection manager, as Linux's iWARP connection
 * manager reports them: a CONNECT_REQUEST's initiator_depth is the
 * peer's IRD (what the listener may read) and its responder_resources the
 * peer's ORD (what the listener must serve). A server that accepts with
 * the request's values (tgt's iSER target does) can then post RDMA Reads,
 * as many as the client's IRD allows. Asymmetric values, both ways.
 * Usage: cm_ird_ord IRD ORD (the client's). "ok" and 0 when every check
 * held. */
#include <unistd.h>

#include "cm.h"

static struct ibv_pd *pd;

/* Posts `n` RDMA Reads of 8 octets each on `qp` from the peer's `rkey` at
 * `remote` into `mr`, and waits for their completions on `cq`. */
static void read_from(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
		      uint64_t remote, uint32_t rkey, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { (uintptr_t)mr->addr + 8 * i, 8, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_READ,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		wr.wr.rdma.remote_addr = remote + 8 * i;
		wr.wr.rdma.rkey = rkey;
		CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	}
	int done = 0;
	for (int spins = 0; done < n && spins < 2000000; spins++) {
		struct ibv_wc wc;
		int got = ibv_poll_cq(cq, 1, &wc);
		if (got == 1) {
			if (wc.status != IBV_WC_SUCCESS)
				fprintf(stderr, "read %lu: %s\n", (unsigned long)wc.wr_id,
					ibv_wc_status_str(wc.status));
			CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ);
			done++;
		} else if (!got) {
			usleep(10);
		}
	}
	CHECK(done == n);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int ird = atoi(argv[1]), ord = atoi(argv[2]);
	alarm(60);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint16_t port;
	struct rdma_cm_id *listener = loopback_listener(ch, NULL, &port);
	pd = ibv_alloc_pd(cm_context());
	struct ibv_cq *cq = ibv_create_cq(cm_context(), 64, NULL, NULL, 0);
	struct ibv_cq *server_cq = ibv_create_cq(cm_context(), 64, NULL, NULL, 0);
	CHECK(pd != NULL && cq != NULL && server_cq != NULL);
	static uint64_t client_buf[16], server_buf[16];
	for (int i = 0; i < 16; i++)
		client_buf[i] = server_buf[i] = 0x1000 + i;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *client_mr = ibv_reg_mr(pd, client_buf, sizeof(client_buf), access);
	struct ibv_mr *server_mr = ibv_reg_mr(pd, server_buf, sizeof(server_buf), access);
	CHECK(client_mr != NULL && server_mr != NULL);

	struct rdma_cm_id *client = resolved_client(ch, port);
	make_qp(client, pd, cq);
	struct rdma_conn_param param;
	memset(&param, 0, sizeof(param));
	param.responder_resources = ird;
	param.initiator_depth = ord;
	CHECK(rdma_connect(client, &param) == 0);

	struct rdma_cm_event *request = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	/* The listener may read as deep as the client's IRD, and must serve
	 * as many reads as the client's ORD. */
	CHECK(request->param.conn.initiator_depth == ird);
	CHECK(request->param.conn.responder_resources == ord);
	struct rdma_cm_id *child = request->id;
	struct rdma_conn_param reply = request->param.conn;
	reply.private_data = NULL;
	reply.private_data_len = 0;
	rdma_ack_cm_event(request);
	struct ibv_qp_init_attr attr = rc_qp_attr(server_cq, 8);
	CHECK(rdma_create_qp(child, pd, &attr) == 0);
	CHECK(rdma_accept(child, &reply) == 0);
	expect_both(ch, RDMA_CM_EVENT_ESTABLISHED);

	/* As tgt does for each SCSI WRITE: the server reads the client. */
	if (ird > 0)
		read_from(child->qp, server_cq, server_mr, (uintptr_t)client_buf,
			  client_mr->rkey, ird);
	/* And the client reads the server, within its ORD. */
	if (ord > 0)
		read_from(client->qp, cq, client_mr, (uintptr_t)server_buf,
			  server_mr->rkey, ord);

	disconnect_pair(ch, client, child);
	CHECK(rdma_destroy_id(listener) == 0);
	return finish();
}
