/* What a program that takes registered memory away before ibv_dereg_mr
 * gets: never a crash, never a peer's write in another mapping.
 *
 *   mr_unmapped SCENARIO
 *
 * Each run connects a client and a server in this process over loopback
 * (the server's queue pair is the target), checks that an RDMA Write into
 * the server's region lands, then:
 *
 *   munmap      the server unmaps the region (through the drop-in's
 *               munmap) and maps new memory at the same address;
 *   remap       the server maps new memory over the region (mmap with
 *               MAP_FIXED, no munmap);
 *   mremap      the server grows the region's mapping with MREMAP_MAYMOVE
 *               (the pages keep what they held, wherever they are);
 *   free        the region was malloc'ed large (glibc mapped it on its
 *               own) and is freed: glibc unmaps it internally, unseen;
 *   dereg       the client keeps Writes in flight while the server
 *               deregisters, unmaps, and maps new memory there;
 *
 * and the client writes again: the server's queue pair must raise
 * IBV_EVENT_QP_ACCESS_ERR (it sent a Terminate), a Read the client posts
 * behind the Write must complete in error, and new memory at the address
 * must be untouched. And:
 *
 *   fork        (instead) the client keeps Writes in flight while children
 *               of the process unmap their copy of the region: each
 *               exits at once, and the Writes keep landing;
 *   read_source the region becomes inaccessible (mprotect, unseen) and the
 *               client reads it: same outcome;
 *   send_source a region of the client's becomes inaccessible and the
 *               client sends from it: IBV_WC_LOC_PROT_ERR;
 *   send_large  the same with 64 KiB, which the socket transport hands to
 *               the kernel's writev where it lies (EFAULT): the
 *               connection ends, the server's receive never completes
 *               with data, and a later Send is flushed;
 *   recv_sink   the server's receive lies in memory made inaccessible
 *               when a Send arrives: IBV_WC_LOC_PROT_ERR;
 *   read_sink   the client's Read lands in memory it made inaccessible:
 *               the Read completes in error;
 *   chain       a SIGSEGV handler of the program's, installed before the
 *               first registration, still gets the faults that are its
 *               own; one installed after it that hands on the faults it
 *               does not know keeps send_source's outcome;
 *   nochain     a handler installed after the first registration that
 *               does not hand faults on gets the guarded copy's fault
 *               (send_source): it prints "program handler" and exits 3.
 *
 * "ok" and 0 when every check held. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define DEPTH 32
#define MSG 64

struct pair {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listener, *client, *server;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *client_cq, *server_cq;
	/* The client's source and sink of its own requests. */
	char *local;
	struct ibv_mr *local_mr;
	/* A server region that stays, to read from. */
	char *stays;
	struct ibv_mr *stays_mr;
};

static size_t page;

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int type)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *event = NULL;
	if (poll(&pfd, 1, 10000) != 1 || rdma_get_cm_event(ch, &event)) {
		fprintf(stderr, "no %s\n", rdma_event_str(type));
		exit(2);
	}
	if (event->event != type) {
		fprintf(stderr, "expected %s, got %s\n", rdma_event_str(type),
			rdma_event_str(event->event));
		exit(2);
	}
	return event;
}

static void connect_pair(struct pair *p)
{
	memset(p, 0, sizeof(*p));
	p->ch = rdma_create_event_channel();
	CHECK(p->ch != NULL);
	CHECK(rdma_create_id(p->ch, &p->listener, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin = { .sin_family = AF_INET };
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(rdma_bind_addr(p->listener, (struct sockaddr *)&sin) == 0);
	CHECK(rdma_listen(p->listener, 4) == 0);
	p->ctx = cm_context();
	p->pd = ibv_alloc_pd(p->ctx);
	p->client_cq = ibv_create_cq(p->ctx, 4 * DEPTH, NULL, NULL, 0);
	p->server_cq = ibv_create_cq(p->ctx, 4 * DEPTH, NULL, NULL, 0);
	CHECK(p->pd && p->client_cq && p->server_cq);

	sin.sin_port = rdma_get_src_port(p->listener);
	CHECK(rdma_create_id(p->ch, &p->client, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_resolve_addr(p->client, NULL, (struct sockaddr *)&sin, 2000) == 0);
	rdma_ack_cm_event(next_event(p->ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(p->client, 2000) == 0);
	rdma_ack_cm_event(next_event(p->ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	struct ibv_qp_init_attr attr = rc_qp_attr(p->client_cq, DEPTH);
	CHECK(rdma_create_qp(p->client, p->pd, &attr) == 0);
	struct rdma_conn_param param = { .responder_resources = 4, .initiator_depth = 4 };
	CHECK(rdma_connect(p->client, &param) == 0);

	struct rdma_cm_event *request = next_event(p->ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	p->server = request->id;
	rdma_ack_cm_event(request);
	attr = rc_qp_attr(p->server_cq, DEPTH);
	CHECK(rdma_create_qp(p->server, p->pd, &attr) == 0);
	CHECK(rdma_accept(p->server, &param) == 0);
	rdma_ack_cm_event(next_event(p->ch, RDMA_CM_EVENT_ESTABLISHED));
	rdma_ack_cm_event(next_event(p->ch, RDMA_CM_EVENT_ESTABLISHED));

	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	p->local = malloc(page);
	memset(p->local, 0x5A, page);
	p->local_mr = ibv_reg_mr(p->pd, p->local, page, all);
	p->stays = malloc(page);
	p->stays_mr = ibv_reg_mr(p->pd, p->stays, page, all);
	CHECK(p->local_mr && p->stays_mr);
}

/* Posts a signalled request of `opcode` on the client: `len` octets of
 * its local region, to or from `remote` under `rkey`. */
static int post(struct pair *p, uint64_t wr_id, int opcode, void *local, uint32_t lkey,
		void *remote, uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = opcode;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)remote;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(p->client->qp, &wr, &bad);
}

/* The next completion of `cq`, waiting at most 10 s. */
static struct ibv_wc next_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	for (int i = 0; i < 10000; i++) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n == 1)
			return wc;
		CHECK(n == 0);
		usleep(1000);
	}
	fprintf(stderr, "no completion within 10 s\n");
	exit(2);
}

/* Writes MSG octets of the client's region into `remote` and checks that
 * they land. */
static void write_lands(struct pair *p, char *remote, uint32_t rkey)
{
	CHECK(post(p, 1, IBV_WR_RDMA_WRITE, p->local, p->local_mr->lkey, remote, rkey, MSG) == 0);
	struct ibv_wc wc = next_wc(p->client_cq);
	CHECK(wc.status == IBV_WC_SUCCESS);
	CHECK(post(p, 2, IBV_WR_RDMA_READ, p->local + MSG, p->local_mr->lkey, p->stays,
		   p->stays_mr->rkey, 8) == 0);
	wc = next_wc(p->client_cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2);
	CHECK(memcmp(remote, p->local, MSG) == 0);
}

/* Waits up to 10 s for an asynchronous event naming `qp`, skipping (and
 * acknowledging) events of other queue pairs; returns its type. */
static int async_event_of(struct pair *p, struct ibv_qp *qp)
{
	struct pollfd pfd = { .fd = p->ctx->async_fd, .events = POLLIN };
	for (int i = 0; i < 10; i++) {
		if (poll(&pfd, 1, 10000) != 1)
			break;
		struct ibv_async_event event;
		CHECK(ibv_get_async_event(p->ctx, &event) == 0);
		int type = event.event_type;
		struct ibv_qp *of = event.element.qp;
		ibv_ack_async_event(&event);
		if (of == qp)
			return type;
	}
	fprintf(stderr, "no asynchronous event for the queue pair\n");
	return -1;
}

/* The client writes into `remote` (gone) and reads behind it: the read
 * must fail, the server's queue pair report an access error. */
static void late_write_refused(struct pair *p, char *remote, uint32_t rkey)
{
	CHECK(post(p, 3, IBV_WR_RDMA_WRITE, p->local, p->local_mr->lkey, remote, rkey, MSG) == 0);
	CHECK(post(p, 4, IBV_WR_RDMA_READ, p->local + MSG, p->local_mr->lkey, p->stays,
		   p->stays_mr->rkey, 8) == 0);
	struct ibv_wc write = next_wc(p->client_cq), read = next_wc(p->client_cq);
	CHECK(write.wr_id == 3 && read.wr_id == 4);
	if (read.status == IBV_WC_SUCCESS)
		fprintf(stderr, "the Read behind the late Write succeeded\n");
	CHECK(read.status != IBV_WC_SUCCESS);
	int event = async_event_of(p, p->server->qp);
	if (event != IBV_EVENT_QP_ACCESS_ERR)
		fprintf(stderr, "server event %d\n", event);
	CHECK(event == IBV_EVENT_QP_ACCESS_ERR);
}

/* Whether `len` octets at `at` all hold `octet`. */
static int all(const char *at, size_t len, char octet)
{
	for (size_t i = 0; i < len; i++)
		if (at[i] != octet)
			return 0;
	return 1;
}

/* New memory at `at`, in place of what was there, filled with 0xAB. */
static char *map_again(char *at, size_t len, int flags)
{
	char *again = mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
	CHECK(again == at);
	if (again != at)
		exit(2);
	memset(again, 0xAB, len);
	return again;
}

static const int REMOTE = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

/* munmap, remap: the region is revoked before the range changes hands. */
static void replaced(struct pair *p, int remap)
{
	size_t len = 2 * page;
	char *region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, region, len, REMOTE);
	CHECK(mr != NULL);
	write_lands(p, region + 100, mr->rkey);
	char *again;
	if (remap) {
		again = map_again(region, len, MAP_FIXED);
	} else {
		CHECK(munmap(region, len) == 0);
		again = map_again(region, len, MAP_FIXED_NOREPLACE);
	}
	late_write_refused(p, region + 100, mr->rkey);
	usleep(100 * 1000);
	CHECK(all(again, len, (char)0xAB));
	CHECK(ibv_dereg_mr(mr) == 0);
}

/* mremap: a mapping that may move is revoked, moved or not; the pages,
 * wherever they are now, keep what they held. */
static void remapped(struct pair *p)
{
	size_t len = 2 * page;
	char *region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, region, len, REMOTE);
	CHECK(mr != NULL);
	write_lands(p, region + 100, mr->rkey);
	char *moved = mremap(region, len, 4 * len, MREMAP_MAYMOVE);
	CHECK(moved != MAP_FAILED);
	memset(moved + 100 + MSG, 0xAB, len);
	late_write_refused(p, region + 100, mr->rkey);
	usleep(100 * 1000);
	CHECK(memcmp(moved + 100, p->local, MSG) == 0);
	CHECK(all(moved + 100 + MSG, len, (char)0xAB));
	CHECK(ibv_dereg_mr(mr) == 0);
}

/* free: glibc unmaps a large block on its own; the guarded copy fails. */
static void freed(struct pair *p)
{
	size_t len = 8 << 20;
	char *region = malloc(len);
	CHECK(region != NULL);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, region, len, REMOTE);
	CHECK(mr != NULL);
	write_lands(p, region + len / 2, mr->rkey);
	/* Only the address is used after the free: the peer names it. */
	uintptr_t middle = (uintptr_t)region + len / 2;
	free(region);
	late_write_refused(p, (char *)middle, mr->rkey);
	CHECK(ibv_dereg_mr(mr) == 0);
}

struct writer {
	struct pair *p;
	char *remote;
	uint32_t rkey;
	/* Octets per Write, from the region onto itself (its lkey); MSG
	 * from the client's region when 0. */
	uint32_t len, lkey;
	volatile int stop;
	int refused;
};

/* Keeps DEPTH Writes in flight into the server's region until one
 * fails (the region is gone) or it is told to stop. */
static void *keep_writing(void *arg)
{
	struct writer *w = arg;
	int outstanding = 0;
	uint32_t len = w->len ? w->len : MSG;
	char *source = w->len ? w->remote : w->p->local;
	uint32_t lkey = w->len ? w->lkey : w->p->local_mr->lkey;
	while (!w->stop && !w->refused) {
		while (outstanding < DEPTH &&
		       post(w->p, 5, IBV_WR_RDMA_WRITE, source, lkey,
			    w->remote + (w->len ? 0 : (outstanding % 8) * MSG), w->rkey, len) == 0)
			outstanding++;
		struct ibv_wc wc;
		int n;
		while ((n = ibv_poll_cq(w->p->client_cq, 1, &wc)) == 1) {
			outstanding--;
			if (wc.status != IBV_WC_SUCCESS)
				w->refused = 1;
		}
		usleep(100);
	}
	return NULL;
}

/* dereg: Writes in flight, then deregistration, unmapping and new memory
 * at the address: nothing lands after ibv_dereg_mr returned. */
static void deregistered(struct pair *p)
{
	size_t len = 2 * page;
	char *region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, region, len, REMOTE);
	CHECK(mr != NULL);
	struct writer w = { .p = p, .remote = region, .rkey = mr->rkey };
	pthread_t thread;
	CHECK(pthread_create(&thread, NULL, keep_writing, &w) == 0);
	usleep(50 * 1000);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(munmap(region, len) == 0);
	char *again = map_again(region, len, MAP_FIXED_NOREPLACE);
	/* The next Write is refused: the server sends a Terminate. */
	CHECK(async_event_of(p, p->server->qp) == IBV_EVENT_QP_ACCESS_ERR);
	w.stop = 1;
	pthread_join(thread, NULL);
	usleep(100 * 1000);
	CHECK(all(again, len, (char)0xAB));
}

/* fork: children of a process whose placements run unmap the registered
 * region (their copy of it); none may hang. */
static void forked(struct pair *p)
{
	size_t len = 1 << 20;
	char *region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, region, len, REMOTE);
	CHECK(mr != NULL);
	/* Large Writes keep the server's placements (pinned) busy. */
	struct writer w = { .p = p, .remote = region, .rkey = mr->rkey, .len = len, .lkey = mr->lkey };
	pthread_t thread;
	CHECK(pthread_create(&thread, NULL, keep_writing, &w) == 0);
	usleep(20 * 1000);
	for (int i = 0; i < 100; i++) {
		pid_t child = fork();
		if (child == 0) {
			alarm(5);
			_exit(munmap(region, len) == 0 ? 0 : 1);
		}
		int status = -1;
		CHECK(child > 0 && waitpid(child, &status, 0) == child);
		if (status != 0)
			fprintf(stderr, "child %d: status %#x\n", i, status);
		CHECK(status == 0);
	}
	w.stop = 1;
	pthread_join(thread, NULL);
	CHECK(!w.refused);
	CHECK(ibv_dereg_mr(mr) == 0);
}

/* read_source: the peer reads a region the server made inaccessible. */
static void read_source(struct pair *p)
{
	char *region = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, region, page, REMOTE);
	CHECK(mr != NULL);
	write_lands(p, region, mr->rkey);
	CHECK(mprotect(region, page, PROT_NONE) == 0);
	CHECK(post(p, 6, IBV_WR_RDMA_READ, p->local, p->local_mr->lkey, region, mr->rkey, MSG) == 0);
	struct ibv_wc wc = next_wc(p->client_cq);
	CHECK(wc.wr_id == 6 && wc.status != IBV_WC_SUCCESS);
	CHECK(async_event_of(p, p->server->qp) == IBV_EVENT_QP_ACCESS_ERR);
	CHECK(ibv_dereg_mr(mr) == 0);
}

/* recv_sink: the server's receive lies in a region it made inaccessible
 * when the client's Send arrives. */
static void recv_sink(struct pair *p)
{
	char *region = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, region, page, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	struct ibv_sge sge = { .addr = (uintptr_t)region, .length = MSG, .lkey = mr->lkey };
	struct ibv_recv_wr recv = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 }, *bad_recv;
	CHECK(ibv_post_recv(p->server->qp, &recv, &bad_recv) == 0);
	CHECK(mprotect(region, page, PROT_NONE) == 0);
	CHECK(post(p, 10, IBV_WR_SEND, p->local, p->local_mr->lkey, NULL, 0, MSG) == 0);
	struct ibv_wc wc = next_wc(p->server_cq);
	if (wc.status != IBV_WC_LOC_PROT_ERR)
		fprintf(stderr, "receive into inaccessible memory: %s\n", ibv_wc_status_str(wc.status));
	CHECK(wc.wr_id == 9 && wc.status == IBV_WC_LOC_PROT_ERR);
	CHECK(ibv_dereg_mr(mr) == 0);
}

/* read_sink: the client's Read lands in a region it made inaccessible. */
static void read_sink(struct pair *p)
{
	char *region = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, region, page, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	CHECK(mprotect(region, page, PROT_NONE) == 0);
	CHECK(post(p, 11, IBV_WR_RDMA_READ, region, mr->lkey, p->stays, p->stays_mr->rkey, MSG) == 0);
	struct ibv_wc wc = next_wc(p->client_cq);
	if (wc.status == IBV_WC_SUCCESS)
		fprintf(stderr, "a Read into inaccessible memory succeeded\n");
	CHECK(wc.wr_id == 11 && wc.status != IBV_WC_SUCCESS);
	CHECK(ibv_dereg_mr(mr) == 0);
}

/* send_source: the client sends from a region it made inaccessible. */
static void send_source(struct pair *p)
{
	char *region = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, region, page, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	struct ibv_sge sge = { .addr = (uintptr_t)p->stays, .length = MSG, .lkey = p->stays_mr->lkey };
	struct ibv_recv_wr recv = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad_recv;
	CHECK(ibv_post_recv(p->server->qp, &recv, &bad_recv) == 0);
	CHECK(mprotect(region, page, PROT_NONE) == 0);
	CHECK(post(p, 8, IBV_WR_SEND, region, mr->lkey, NULL, 0, MSG) == 0);
	struct ibv_wc wc = next_wc(p->client_cq);
	if (wc.status != IBV_WC_LOC_PROT_ERR)
		fprintf(stderr, "send from inaccessible memory: %s\n", ibv_wc_status_str(wc.status));
	CHECK(wc.wr_id == 8 && wc.status == IBV_WC_LOC_PROT_ERR);
	CHECK(ibv_dereg_mr(mr) == 0);
}

/* send_large: the client sends 64 KiB from a region it made inaccessible.
 * On the socket transport the payload is written through from the region
 * (no copy of uwarp's reads it); whichever way, nothing of it arrives. */
static void send_large(struct pair *p)
{
	size_t len = 64 * 1024;
	char *region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, region, len, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	char *inbox = malloc(len);
	struct ibv_mr *inbox_mr = ibv_reg_mr(p->pd, inbox, len, IBV_ACCESS_LOCAL_WRITE);
	CHECK(inbox_mr != NULL);
	struct ibv_sge sge = { .addr = (uintptr_t)inbox, .length = len, .lkey = inbox_mr->lkey };
	struct ibv_recv_wr recv = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad_recv;
	CHECK(ibv_post_recv(p->server->qp, &recv, &bad_recv) == 0);
	CHECK(mprotect(region, len, PROT_NONE) == 0);
	CHECK(post(p, 8, IBV_WR_SEND, region, mr->lkey, NULL, 0, len) == 0);
	struct ibv_wc wc = next_wc(p->client_cq);
	CHECK(wc.wr_id == 8);
	if (wc.status == IBV_WC_SUCCESS || wc.status == IBV_WC_LOC_PROT_ERR) {
		/* The stream ended: what follows is flushed. */
		post(p, 9, IBV_WR_SEND, p->local, p->local_mr->lkey, NULL, 0, 8);
		wc = next_wc(p->client_cq);
		if (wc.wr_id != 9 || wc.status == IBV_WC_SUCCESS)
			fprintf(stderr, "after the failed send: %lu %s\n", (unsigned long)wc.wr_id,
				ibv_wc_status_str(wc.status));
		CHECK(wc.wr_id == 9 && wc.status != IBV_WC_SUCCESS);
	} else {
		fprintf(stderr, "send from inaccessible memory: %s\n", ibv_wc_status_str(wc.status));
		CHECK(0);
	}
	wc = next_wc(p->server_cq);
	if (wc.status == IBV_WC_SUCCESS)
		fprintf(stderr, "the server received %u octets\n", wc.byte_len);
	CHECK(wc.wr_id == 7 && wc.status != IBV_WC_SUCCESS);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_dereg_mr(inbox_mr) == 0);
	free(inbox);
}

/* The program's own fault handling: a page its handler makes accessible
 * when touched, and the handler it replaced. */
static char *trap_page;
static volatile int trapped;
static struct sigaction replaced_action;

static void program_handler(int sig, siginfo_t *info, void *context)
{
	char *at = info->si_addr;
	if (at >= trap_page && at < trap_page + page) {
		mprotect(trap_page, page, PROT_READ | PROT_WRITE);
		trapped++;
		return;
	}
	if (replaced_action.sa_flags & SA_SIGINFO) {
		replaced_action.sa_sigaction(sig, info, context);
		return;
	}
	signal(sig, SIG_DFL);
}

static void exiting_handler(int sig)
{
	(void)sig;
	static const char said[] = "program handler\n";
	if (write(1, said, sizeof(said) - 1) < 0)
		_exit(4);
	_exit(3);
}

static void install(void (*handler)(int, siginfo_t *, void *))
{
	struct sigaction action;
	memset(&action, 0, sizeof(action));
	action.sa_sigaction = handler;
	action.sa_flags = SA_SIGINFO;
	CHECK(sigaction(SIGSEGV, &action, &replaced_action) == 0);
}

/* Touches the trap page: the program's handler must make it work. */
static void touch_trap(void)
{
	CHECK(mprotect(trap_page, page, PROT_NONE) == 0);
	int before = trapped;
	((volatile char *)trap_page)[10] = 42;
	CHECK(trapped == before + 1 && trap_page[10] == 42);
}

int main(int argc, char **argv)
{
	alarm(60);
	if (argc != 2) {
		fprintf(stderr, "usage: mr_unmapped SCENARIO\n");
		return 2;
	}
	page = (size_t)sysconf(_SC_PAGESIZE);
	trap_page = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	const char *scenario = argv[1];
	if (strcmp(scenario, "chain") == 0)
		install(program_handler); /* before the first registration */

	struct pair p;
	connect_pair(&p);
	if (strcmp(scenario, "munmap") == 0) {
		replaced(&p, 0);
	} else if (strcmp(scenario, "remap") == 0) {
		replaced(&p, 1);
	} else if (strcmp(scenario, "mremap") == 0) {
		remapped(&p);
	} else if (strcmp(scenario, "free") == 0) {
		freed(&p);
	} else if (strcmp(scenario, "dereg") == 0) {
		deregistered(&p);
	} else if (strcmp(scenario, "fork") == 0) {
		forked(&p);
	} else if (strcmp(scenario, "read_source") == 0) {
		read_source(&p);
	} else if (strcmp(scenario, "recv_sink") == 0) {
		recv_sink(&p);
	} else if (strcmp(scenario, "read_sink") == 0) {
		read_sink(&p);
	} else if (strcmp(scenario, "send_source") == 0) {
		send_source(&p);
	} else if (strcmp(scenario, "send_large") == 0) {
		send_large(&p);
	} else if (strcmp(scenario, "chain") == 0) {
		touch_trap();
		install(program_handler); /* after: it hands on what is not its own */
		touch_trap();
		send_source(&p);
	} else if (strcmp(scenario, "nochain") == 0) {
		signal(SIGSEGV, exiting_handler);
		send_source(&p);
	} else {
		fprintf(stderr, "unknown scenario %s\n", scenario);
		return 2;
	}
	return finish();
}
