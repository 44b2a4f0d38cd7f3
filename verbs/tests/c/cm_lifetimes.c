/* The connection manager's lifetimes under real application patterns, as
 * rdma-core defines them: events against destruction, requests against
 * their listener, channels migrated and destroyed, synchronous ids'
 * waits (signals, cancellation, the event they keep), stale handles.
 * Run on uwarp's librdmacm.so.1 by uwarp-run, over loopback.
 *
 * Usage: cm_lifetimes SCENARIO [ITERATIONS]. Prints "ok" and exits 0 when
 * every check held; a hang is ended by alarm() (SIGALRM kills). */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"

static struct ibv_pd *pd;
static struct ibv_cq *cq;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void open_device(void)
{
	if (pd)
		return;
	pd = ibv_alloc_pd(cm_context());
	cq = ibv_create_cq(cm_context(), 256, NULL, NULL, 0);
	CHECK(pd != NULL && cq != NULL);
}

/* An asynchronous client on `ch` connecting to `port` (its queue pair
 * made); the caller takes its events. */
static struct rdma_cm_id *connecting_client(struct rdma_event_channel *ch, uint16_t port)
{
	struct rdma_cm_id *client = resolved_client(ch, port);
	open_device();
	make_qp(client, pd, cq);
	CHECK(rdma_connect(client, NULL) == 0);
	return client;
}

static void destroy_client(struct rdma_cm_id *client)
{
	rdma_destroy_qp(client);
	CHECK(rdma_destroy_id(client) == 0);
}

/* Waits until `ch` has an event queued, at most `ms`; whether it has. */
static int readable(struct rdma_event_channel *ch, int ms)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	return poll(&pfd, 1, ms) == 1;
}

/* ---- Row 1: an event handed out while its id is destroyed. ---- */

struct race {
	struct rdma_event_channel *ch;
	atomic_int destroy_returned; /* the destroy of the current id returned */
	atomic_int stop;
	_Atomic(struct rdma_cm_id *) current; /* the id being destroyed */
	int held_after_destroy;      /* an event held while its destroy returned */
	int taken;
	atomic_int requests;         /* connection requests taken */
};

/* Takes every event; holding each a moment, checks that the destroy of
 * its id (a request's: its listener) has not returned meanwhile
 * (rdma_destroy_id waits for held events), then acknowledges it. */
static void *take_events(void *arg)
{
	struct race *r = arg;
	/* Non-blocking: an event seen by poll can be dropped before it is
	 * taken, when its id is destroyed meanwhile (as in the kernel). */
	int flags = fcntl(r->ch->fd, F_GETFL);
	CHECK(fcntl(r->ch->fd, F_SETFL, flags | O_NONBLOCK) == 0);
	while (!atomic_load(&r->stop)) {
		if (!readable(r->ch, 10))
			continue;
		struct rdma_cm_event *event;
		if (rdma_get_cm_event(r->ch, &event))
			continue;
		struct rdma_cm_id *id = event->id;
		/* The id is valid while its event is held. */
		volatile void *context = id->context;
		(void)context;
		usleep(50);
		/* Its destroy has not returned: the main thread is still on it,
		 * and has not said it returned. */
		struct rdma_cm_id *about = event->event == RDMA_CM_EVENT_CONNECT_REQUEST
			? event->listen_id : id;
		if (atomic_load(&r->current) != about || atomic_load(&r->destroy_returned))
			r->held_after_destroy++;
		r->taken++;
		if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			atomic_fetch_add(&r->requests, 1);
			/* A new id: turned down, as a server does. */
			CHECK(rdma_reject(id, NULL, 0) == 0);
			CHECK(rdma_destroy_id(id) == 0);
		}
		rdma_ack_cm_event(event);
	}
	return NULL;
}

static void event_vs_destroy(int iterations)
{
	struct race r = { .ch = rdma_create_event_channel() };
	CHECK(r.ch != NULL);
	pthread_t taker;
	CHECK(pthread_create(&taker, NULL, take_events, &r) == 0);
	struct sockaddr_in sin = loopback(9);
	for (int i = 0; i < iterations; i++) {
		struct rdma_cm_id *id;
		CHECK(rdma_create_id(r.ch, &id, &r, RDMA_PS_TCP) == 0);
		atomic_store(&r.destroy_returned, 0);
		atomic_store(&r.current, id);
		/* Posts ADDR_RESOLVED at once; the taker races the destroy. */
		CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000) == 0);
		if (i % 3)
			usleep(i % 7);
		CHECK(rdma_destroy_id(id) == 0);
		atomic_store(&r.destroy_returned, 1);
	}
	atomic_store(&r.stop, 1);
	pthread_join(taker, NULL);
	CHECK(r.held_after_destroy == 0);
	/* Some events were taken, some dropped: the race was run. */
	fprintf(stderr, "event-vs-destroy: %d of %d events taken\n", r.taken, iterations);
	rdma_destroy_event_channel(r.ch);
}

/* ---- Row 2 (and 14): requests against their listener's destroy. ---- */

static void request_vs_listener_destroy(int iterations)
{
	struct race r = { .ch = rdma_create_event_channel() };
	struct rdma_event_channel *clients = rdma_create_event_channel();
	CHECK(r.ch != NULL && clients != NULL);
	pthread_t taker;
	CHECK(pthread_create(&taker, NULL, take_events, &r) == 0);
	int rejected_fast = 0;
	for (int i = 0; i < iterations; i++) {
		uint16_t port;
		struct rdma_cm_id *listener = loopback_listener(r.ch, &r, &port);
		atomic_store(&r.destroy_returned, 0);
		atomic_store(&r.current, listener);
		/* Read before the connect: the request can be taken and
		 * counted before rdma_connect returns (this thread preempted
		 * meanwhile). Earlier listeners' requests were counted, or
		 * dropped, before their destroy returned. */
		int taken_before = atomic_load(&r.requests);
		struct rdma_cm_id *client = connecting_client(clients, port);
		/* Destroy as soon as the request is queued (or taken already):
		 * the taker races. */
		double waiting = now();
		struct rdma_cm_event *answer = NULL;
		while (!readable(r.ch, 1) && atomic_load(&r.requests) == taken_before) {
			/* The taker may take the request and reject it before
			 * this loop sees either: the client's answer ends the
			 * wait too. */
			if (readable(clients, 0) && rdma_get_cm_event(clients, &answer) == 0)
				break;
			if (now() - waiting > 10.0) {
				fprintf(stderr, "iteration %d: no request in 10 s\n", i);
				exit(2);
			}
		}
		/* The taker counts a request before it rejects it, and the
		 * listener lives: the client is answered only after its
		 * request was counted. */
		CHECK(!answer || atomic_load(&r.requests) != taken_before);
		CHECK(rdma_destroy_id(listener) == 0);
		atomic_store(&r.destroy_returned, 1);
		/* The request was taken (and rejected by the taker) or dropped
		 * unread (rejected at once): the client hears either way,
		 * within a second. */
		double start = now();
		struct rdma_cm_event *event = answer;
		if (!event) {
			CHECK(readable(clients, 5000));
			CHECK(rdma_get_cm_event(clients, &event) == 0);
		}
		CHECK(event->event == RDMA_CM_EVENT_REJECTED);
		if (now() - start < 1.0)
			rejected_fast++;
		rdma_ack_cm_event(event);
		destroy_client(client);
	}
	atomic_store(&r.stop, 1);
	pthread_join(taker, NULL);
	CHECK(r.held_after_destroy == 0);
	CHECK(rejected_fast == iterations);
	fprintf(stderr, "request-vs-listener-destroy: %d of %d requests taken\n", r.taken,
		iterations);
	rdma_destroy_event_channel(r.ch);
	rdma_destroy_event_channel(clients);
}

/* Row 2, deterministic: a held request keeps its listener's destroy
 * waiting; row 8: its new id can be rejected and destroyed before the
 * request is acknowledged. */
struct destroyer {
	struct rdma_cm_id *id;
	atomic_int returned;
};

static void *destroy_in_thread(void *arg)
{
	struct destroyer *d = arg;
	CHECK(rdma_destroy_id(d->id) == 0);
	atomic_store(&d->returned, 1);
	return NULL;
}

static void held_request(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	int marker = 7;
	uint16_t port;
	struct rdma_cm_id *listener = loopback_listener(ch, &marker, &port);
	struct rdma_cm_id *client = connecting_client(ch, port);
	struct rdma_cm_event *request = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	struct rdma_cm_id *child = request->id;
	/* Row 8: reject and destroy the new id while the request is held. */
	CHECK(rdma_reject(child, NULL, 0) == 0);
	CHECK(rdma_destroy_id(child) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_REJECTED, client));
	/* Row 2: the listener's destroy waits for the held request. */
	struct destroyer d = { .id = listener };
	pthread_t thread;
	CHECK(pthread_create(&thread, NULL, destroy_in_thread, &d) == 0);
	usleep(200 * 1000);
	CHECK(atomic_load(&d.returned) == 0);
	CHECK(request->listen_id == listener && *(int *)request->listen_id->context == 7);
	rdma_ack_cm_event(request);
	pthread_join(thread, NULL);
	CHECK(atomic_load(&d.returned) == 1);
	destroy_client(client);
	rdma_destroy_event_channel(ch);
}

/* ---- Row 3: a listener's requests follow it to a new channel. ---- */

static void children_follow_migrated_listener(int iterations)
{
	for (int i = 0; i < iterations; i++) {
		struct rdma_event_channel *a = rdma_create_event_channel();
		struct rdma_event_channel *b = rdma_create_event_channel();
		struct rdma_event_channel *clients = rdma_create_event_channel();
		uint16_t port;
		struct rdma_cm_id *listener = loopback_listener(a, NULL, &port);
		CHECK(rdma_migrate_id(listener, b) == 0);
		CHECK(listener->channel == b);
		rdma_destroy_event_channel(a);
		struct rdma_cm_id *client = connecting_client(clients, port);
		struct rdma_cm_event *request = expect(b, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
		struct rdma_cm_id *child = request->id;
		CHECK(child->channel == b);
		rdma_ack_cm_event(request);
		make_qp(child, pd, cq);
		CHECK(rdma_accept(child, NULL) == 0);
		rdma_ack_cm_event(expect(b, RDMA_CM_EVENT_ESTABLISHED, child));
		rdma_ack_cm_event(expect(clients, RDMA_CM_EVENT_ESTABLISHED, client));
		CHECK(rdma_disconnect(client) == 0);
		rdma_ack_cm_event(expect(b, RDMA_CM_EVENT_DISCONNECTED, child));
		rdma_ack_cm_event(expect(clients, RDMA_CM_EVENT_DISCONNECTED, client));
		destroy_client(client);
		destroy_client(child);
		CHECK(rdma_destroy_id(listener) == 0);
		rdma_destroy_event_channel(b);
		rdma_destroy_event_channel(clients);
	}
}

/* ---- Row 7: unread events queue without bound. ---- */

static void unread_events(int count)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin = loopback(9);
	for (int i = 0; i < count; i++)
		CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000) == 0);
	int flags = fcntl(ch->fd, F_GETFL);
	CHECK(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) == 0);
	int taken = 0;
	struct rdma_cm_event *event;
	while (rdma_get_cm_event(ch, &event) == 0) {
		CHECK(event->event == RDMA_CM_EVENT_ADDR_RESOLVED);
		rdma_ack_cm_event(event);
		taken++;
	}
	CHECK(errno == EAGAIN);
	CHECK(taken == count);
	/* Readable exactly while an event is queued. */
	CHECK(!readable(ch, 0));
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
}

/* ---- Row 9: a synchronous id migrated to a channel is asynchronous. ---- */

static void migrate_sync(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0);
	CHECK(id->channel != NULL); /* rdma-core gives a synchronous id a channel of its own */
	struct sockaddr_in sin = loopback(9);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000) == 0);
	CHECK(id->event != NULL && id->event->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(rdma_migrate_id(id, ch) == 0);
	CHECK(id->channel == ch && id->event == NULL);
	/* Asynchronous now: returns at once, its event on the channel. */
	CHECK(rdma_resolve_route(id, 2000) == 0);
	CHECK(readable(ch, 2000));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, id));
	/* And back: synchronous again on a channel of its own. */
	CHECK(rdma_migrate_id(id, NULL) == 0);
	CHECK(id->channel != NULL && id->channel != ch);
	errno = 0;
	CHECK(rdma_migrate_id(id, NULL) == -1 && errno == EINVAL);
	CHECK(rdma_resolve_route(id, 2000) == 0);
	CHECK(id->event != NULL && id->event->event == RDMA_CM_EVENT_ROUTE_RESOLVED);
	CHECK(rdma_destroy_id(id) == 0);
	rdma_destroy_event_channel(ch);
}

/* ---- Row 10: a signal without SA_RESTART interrupts a synchronous
 * wait; one with SA_RESTART does not. ---- */

static atomic_int alarms;

static void on_alarm(int signal)
{
	(void)signal;
	atomic_fetch_add(&alarms, 1);
}

struct signal_later {
	pthread_t target;
	int after_ms;
};

/* Sends SIGUSR1 to the target thread after a while. */
static void *signal_later(void *arg)
{
	struct signal_later *s = arg;
	usleep(s->after_ms * 1000);
	pthread_kill(s->target, SIGUSR1);
	return NULL;
}

/* Connects to the port in `arg` after the second signal, and waits for
 * ESTABLISHED. */
static void *late_client(void *arg)
{
	uint16_t port = *(uint16_t *)arg;
	usleep(700 * 1000);
	struct rdma_event_channel *clients = rdma_create_event_channel();
	struct rdma_cm_id *client = connecting_client(clients, port);
	rdma_ack_cm_event(expect(clients, RDMA_CM_EVENT_ESTABLISHED, client));
	return client;
}

static void sync_wait_interrupted(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	uint16_t port;
	struct rdma_cm_id *listener = loopback_listener(NULL, NULL, &port);
	struct rdma_cm_id *child = NULL;
	struct signal_later later = { pthread_self(), 300 };
	pthread_t signaller, client_thread;
	CHECK(pthread_create(&signaller, NULL, signal_later, &later) == 0);
	double start = now();
	errno = 0;
	CHECK(rdma_get_request(listener, &child) == -1 && errno == EINTR);
	CHECK(now() - start < 2.0 && atomic_load(&alarms) == 1);
	pthread_join(signaller, NULL);
	/* With SA_RESTART the wait goes on, and ends with the request. */
	sa.sa_flags = SA_RESTART;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	CHECK(pthread_create(&signaller, NULL, signal_later, &later) == 0);
	CHECK(pthread_create(&client_thread, NULL, late_client, &port) == 0);
	CHECK(rdma_get_request(listener, &child) == 0);
	CHECK(atomic_load(&alarms) == 2);
	make_qp(child, pd, cq);
	CHECK(rdma_accept(child, NULL) == 0);
	void *client = NULL;
	pthread_join(client_thread, &client);
	pthread_join(signaller, NULL);
	CHECK(client != NULL);
	CHECK(rdma_disconnect(child) == 0);
	destroy_client(client);
	destroy_client(child);
	CHECK(rdma_destroy_id(listener) == 0);
}

/* ---- Row 13: an id destroyed while it connects. ---- */

static void destroy_while_connecting(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_event_channel *clients = rdma_create_event_channel();
	uint16_t port;
	struct rdma_cm_id *listener = loopback_listener(ch, NULL, &port);
	struct rdma_cm_id *client = connecting_client(clients, port);
	struct rdma_cm_event *request = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	struct rdma_cm_id *child = request->id;
	rdma_ack_cm_event(request);
	/* The client gives up before the answer. */
	destroy_client(client);
	make_qp(child, pd, cq);
	int accepted = rdma_accept(child, NULL) == 0;
	/* The server hears the connection end: accepted, then disconnected
	 * (or the accept fails), within a bound. */
	if (accepted) {
		CHECK(readable(ch, 5000));
		struct rdma_cm_event *event = expect(ch, RDMA_CM_EVENT_ESTABLISHED, child);
		rdma_ack_cm_event(event);
		CHECK(readable(ch, 5000));
		rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED, child));
	}
	destroy_client(child);
	CHECK(rdma_destroy_id(listener) == 0);
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(clients);
}

/* ---- Row 14: unread requests of a destroyed listener or channel are
 * rejected at once. ---- */

static void unread_request_rejected(int destroy_channel)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_event_channel *clients = rdma_create_event_channel();
	uint16_t port;
	struct rdma_cm_id *listener = loopback_listener(ch, NULL, &port);
	struct rdma_cm_id *client = connecting_client(clients, port);
	CHECK(readable(ch, 5000));
	if (destroy_channel)
		rdma_destroy_event_channel(ch);
	else
		CHECK(rdma_destroy_id(listener) == 0);
	double start = now();
	CHECK(readable(clients, 5000));
	rdma_ack_cm_event(expect(clients, RDMA_CM_EVENT_REJECTED, client));
	CHECK(now() - start < 1.0);
	destroy_client(client);
	if (destroy_channel)
		CHECK(rdma_destroy_id(listener) == 0);
	else
		rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(clients);
}

/* ---- Rows 15 and 22: stale handles. ---- */

static void stale_handles(void)
{
	struct rdma_cm_id *a, *b;
	CHECK(rdma_create_id(NULL, &a, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin = loopback(0);
	CHECK(rdma_bind_addr(a, (struct sockaddr *)&sin) == 0);
	CHECK(rdma_get_src_port(a) != 0);
	CHECK(rdma_destroy_id(a) == 0);
	/* The next id of the same size, which a plain allocator would place
	 * where `a` was. */
	CHECK(rdma_create_id(NULL, &b, NULL, RDMA_PS_TCP) == 0);
	CHECK(rdma_get_src_port(a) == 0 && rdma_get_dst_port(a) == 0);
	errno = 0;
	CHECK(rdma_destroy_id(a) == -1 && errno == EINVAL);
	/* `b` was not touched. */
	CHECK(rdma_bind_addr(b, (struct sockaddr *)&sin) == 0);
	CHECK(rdma_get_src_port(b) != 0);
	CHECK(rdma_destroy_id(b) == 0);
}

/* ---- Row 18: a synchronous operation keeps its event in id->event. ---- */

struct sync_server {
	struct rdma_cm_id *listener;
	struct rdma_cm_id *child;
	int ok;
};

static void *accept_with_reply(void *arg)
{
	struct sync_server *s = arg;
	if (rdma_get_request(s->listener, &s->child))
		return NULL;
	struct rdma_cm_id *child = s->child;
	CHECK(child->event != NULL && child->event->event == RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(child->event->param.conn.private_data_len >= 5 &&
	      memcmp(child->event->param.conn.private_data, "host", 5) == 0);
	make_qp(child, pd, cq);
	struct rdma_conn_param param;
	memset(&param, 0, sizeof(param));
	param.private_data = "target";
	param.private_data_len = 7;
	s->ok = rdma_accept(child, &param) == 0;
	CHECK(child->event != NULL && child->event->event == RDMA_CM_EVENT_ESTABLISHED);
	return NULL;
}

static void sync_event_kept(void)
{
	struct sync_server s = { 0 };
	uint16_t port;
	s.listener = loopback_listener(NULL, NULL, &port);
	struct rdma_cm_id *client;
	CHECK(rdma_create_id(NULL, &client, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin = loopback(port);
	CHECK(rdma_resolve_addr(client, NULL, (struct sockaddr *)&sin, 2000) == 0);
	CHECK(client->event != NULL && client->event->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(rdma_resolve_route(client, 2000) == 0);
	CHECK(client->event != NULL && client->event->event == RDMA_CM_EVENT_ROUTE_RESOLVED);
	open_device();
	make_qp(client, pd, cq);
	pthread_t thread;
	CHECK(pthread_create(&thread, NULL, accept_with_reply, &s) == 0);
	struct rdma_conn_param param;
	memset(&param, 0, sizeof(param));
	param.private_data = "host";
	param.private_data_len = 5;
	CHECK(rdma_connect(client, &param) == 0);
	/* The target's private data, as NVMe-oF hosts read it. */
	CHECK(client->event != NULL && client->event->event == RDMA_CM_EVENT_ESTABLISHED);
	CHECK(client->event->param.conn.private_data_len >= 7 &&
	      memcmp(client->event->param.conn.private_data, "target", 7) == 0);
	pthread_join(thread, NULL);
	CHECK(s.ok);
	CHECK(rdma_disconnect(client) == 0);
	destroy_client(client);
	destroy_client(s.child);
	CHECK(rdma_destroy_id(s.listener) == 0);
}

/* ---- Row 4: cancellation. ---- */

struct cancel_case {
	const char *name;
	void *(*body)(void *);
	int block_ms; /* 0: the cancel is pending before the call */
};

static atomic_int cleanups;

static void cleanup(void *arg)
{
	(void)arg;
	atomic_fetch_add(&cleanups, 1);
}

/* Set by a thread that is about to block: the cancel's delay counts from
 * then, so that a slow set-up (a loaded machine) is not cancelled in a
 * call before the one under test, outside its cleanup handler. */
static atomic_int blocking;

static uint16_t cancel_port;
static struct rdma_cm_id *cancel_listener;

static void *blocked_in_get_request(void *arg)
{
	(void)arg;
	struct rdma_cm_id *child;
	pthread_cleanup_push(cleanup, NULL);
	atomic_store(&blocking, 1);
	rdma_get_request(cancel_listener, &child);
	pthread_cleanup_pop(0);
	return NULL;
}

static void *blocked_in_sync_connect(void *arg)
{
	(void)arg;
	/* The asynchronous listener never answers: the connect waits. */
	struct rdma_cm_id *client;
	CHECK(rdma_create_id(NULL, &client, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin = loopback(cancel_port);
	CHECK(rdma_resolve_addr(client, NULL, (struct sockaddr *)&sin, 2000) == 0);
	CHECK(rdma_resolve_route(client, 2000) == 0);
	make_qp(client, pd, cq);
	pthread_cleanup_push(cleanup, NULL);
	atomic_store(&blocking, 1);
	rdma_connect(client, NULL);
	pthread_cleanup_pop(0);
	return NULL;
}

static void *pending_in_resolve(void *arg)
{
	int sync = arg != NULL;
	struct rdma_event_channel *ch = sync ? NULL : rdma_create_event_channel();
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin = loopback(9);
	pthread_cleanup_push(cleanup, NULL);
	pthread_cancel(pthread_self());
	rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000);
	rdma_resolve_route(id, 2000);
	pthread_testcancel();
	pthread_cleanup_pop(0);
	return NULL;
}

static void *pending_in_req_notify(void *arg)
{
	struct ibv_cq *queue = arg;
	pthread_cleanup_push(cleanup, NULL);
	pthread_cancel(pthread_self());
	ibv_req_notify_cq(queue, 0);
	pthread_testcancel();
	pthread_cleanup_pop(0);
	return NULL;
}

static void run_cancel(const char *name, void *(*body)(void *), void *arg, int block_ms)
{
	int before = atomic_load(&cleanups);
	atomic_store(&blocking, 0);
	pthread_t thread;
	CHECK(pthread_create(&thread, NULL, body, arg) == 0);
	if (block_ms) {
		double waiting = now();
		while (!atomic_load(&blocking)) {
			CHECK(now() - waiting < 20.0);
			usleep(1000);
		}
		usleep(block_ms * 1000);
		CHECK(pthread_cancel(thread) == 0);
	}
	void *result = NULL;
	CHECK(pthread_join(thread, &result) == 0);
	if (result != PTHREAD_CANCELED || atomic_load(&cleanups) != before + 1) {
		fprintf(stderr, "%s: the thread was not cancelled\n", name);
		failures++;
	}
}

static void cancellation(void)
{
	cancel_listener = loopback_listener(NULL, NULL, &cancel_port);
	open_device();
	run_cancel("blocked in rdma_get_request", blocked_in_get_request, NULL, 200);
	CHECK(rdma_destroy_id(cancel_listener) == 0);

	struct rdma_event_channel *quiet = rdma_create_event_channel();
	struct rdma_cm_id *silent = loopback_listener(quiet, NULL, &cancel_port);
	run_cancel("blocked in a synchronous rdma_connect", blocked_in_sync_connect, NULL, 300);
	run_cancel("pending in rdma_resolve_addr", pending_in_resolve, NULL, 0);
	run_cancel("pending in a synchronous rdma_resolve_addr", pending_in_resolve, (void *)1, 0);

	/* A completion queue holding a completion, on a channel: a Send
	 * between two connected ids. */
	struct ibv_comp_channel *comp = ibv_create_comp_channel(cm_context());
	struct ibv_cq *queue = ibv_create_cq(cm_context(), 16, NULL, comp, 0);
	CHECK(comp != NULL && queue != NULL);
	CHECK(ibv_req_notify_cq(queue, 0) == 0);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint16_t port;
	struct rdma_cm_id *listener = loopback_listener(ch, NULL, &port);
	struct rdma_cm_id *client = resolved_client(ch, port);
	struct ibv_qp_init_attr attr = rc_qp_attr(queue, 4);
	CHECK(rdma_create_qp(client, pd, &attr) == 0);
	CHECK(rdma_connect(client, NULL) == 0);
	struct rdma_cm_event *request = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	struct rdma_cm_id *child = request->id;
	rdma_ack_cm_event(request);
	make_qp(child, pd, cq);
	static char buf[64];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge sge = { (uintptr_t)buf, sizeof(buf), mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_recv(child->qp, &rwr, &bad_r) == 0);
	CHECK(rdma_accept(child, NULL) == 0);
	expect_both(ch, RDMA_CM_EVENT_ESTABLISHED);
	struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
			   *bad_s;
	CHECK(ibv_post_send(client->qp, &swr, &bad_s) == 0);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(comp, &ev_cq, &ev_ctx) == 0 && ev_cq == queue);
	ibv_ack_cq_events(queue, 1);
	run_cancel("pending in ibv_req_notify_cq", pending_in_req_notify, queue, 0);

	CHECK(rdma_disconnect(client) == 0);
	destroy_client(client);
	destroy_client(child);
	CHECK(rdma_destroy_id(listener) == 0);
	ibv_dereg_mr(mr);
	CHECK(rdma_destroy_id(silent) == 0);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: cm_lifetimes SCENARIO [ITERATIONS]\n");
		return 2;
	}
	const char *scenario = argv[1];
	int n = argc > 2 ? atoi(argv[2]) : 1;
	alarm(120);
	/* The device's domain and queue, through a throwaway id. */
	struct rdma_cm_id *probe;
	CHECK(rdma_create_id(NULL, &probe, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in sin = loopback(9);
	CHECK(rdma_resolve_addr(probe, NULL, (struct sockaddr *)&sin, 2000) == 0);
	open_device();
	CHECK(rdma_destroy_id(probe) == 0);

	if (!strcmp(scenario, "event-vs-destroy"))
		event_vs_destroy(n);
	else if (!strcmp(scenario, "request-vs-listener-destroy"))
		request_vs_listener_destroy(n);
	else if (!strcmp(scenario, "held-request"))
		held_request();
	else if (!strcmp(scenario, "children-follow-migrated-listener"))
		children_follow_migrated_listener(n);
	else if (!strcmp(scenario, "unread-events"))
		unread_events(n);
	else if (!strcmp(scenario, "migrate-sync"))
		migrate_sync();
	else if (!strcmp(scenario, "sync-wait-interrupted"))
		sync_wait_interrupted();
	else if (!strcmp(scenario, "destroy-while-connecting"))
		destroy_while_connecting();
	else if (!strcmp(scenario, "unread-request-of-destroyed-listener"))
		unread_request_rejected(0);
	else if (!strcmp(scenario, "unread-request-of-destroyed-channel"))
		unread_request_rejected(1);
	else if (!strcmp(scenario, "stale-handles"))
		stale_handles();
	else if (!strcmp(scenario, "sync-event-kept"))
		sync_event_kept();
	else if (!strcmp(scenario, "cancellation"))
		cancellation();
	else {
		fprintf(stderr, "unknown scenario %s\n", scenario);
		return 2;
	}
	return finish();
}
