/* rsockets' socket semantics in one process (the listener's accepting is
 * the library's own): a bad descriptor answers EBADF; a connection whose
 * two sides have different queue and buffer sizes (RDMA_SQSIZE,
 * RDMA_RQSIZE, SO_RCVBUF, SO_SNDBUF) carries 1 MiB each way intact;
 * O_NONBLOCK and MSG_DONTWAIT receives with nothing queued answer EAGAIN,
 * a blocking one interrupted by a signal without SA_RESTART EINTR;
 * rpoll (and rselect) over an rsocket and a pipe report each as it
 * becomes ready and time out when neither is; after the peer's rclose the data it sent is
 * read, then end of file, and a send fails with ECONNRESET; after
 * rshutdown(SHUT_WR) the peer reads end of file and can still answer;
 * riomap with no iomap offered answers ENOMEM, datagram sockets ENOSYS;
 * a non-blocking connect answers EINPROGRESS, then rpoll reports POLLOUT
 * (SO_ERROR 0) or, with no listener, POLLERR (errno and SO_ERROR
 * ECONNREFUSED).
 * Usage: rsocket_semantics PORT. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>
#include <rdma/rsocket.h>
#include "check.h"

#define BIG (1 << 20)

/* One direction of the big transfer: `fd` and the pattern's seed. */
struct stream {
	int fd;
	unsigned seed;
	int ok;
};

static unsigned char pattern(unsigned seed, size_t at)
{
	return (unsigned char)((at * 7 + seed) ^ (at >> 9));
}

static void *send_all(void *arg)
{
	struct stream *s = arg;
	unsigned char *buf = malloc(BIG);
	size_t at, sent = 0;

	for (at = 0; at < BIG; at++)
		buf[at] = pattern(s->seed, at);
	while (sent < BIG) {
		ssize_t n = rsend(s->fd, buf + sent, BIG - sent < 70000 ? BIG - sent : 70000, 0);
		if (n <= 0)
			break;
		sent += n;
	}
	s->ok = sent == BIG;
	free(buf);
	return NULL;
}

static void *recv_all(void *arg)
{
	struct stream *s = arg;
	unsigned char *buf = malloc(BIG);
	size_t at, got = 0;

	while (got < BIG) {
		ssize_t n = rrecv(s->fd, buf + got, BIG - got, 0);
		if (n <= 0)
			break;
		got += n;
	}
	s->ok = got == BIG;
	for (at = 0; s->ok && at < BIG; at++)
		s->ok = buf[at] == pattern(s->seed, at);
	free(buf);
	return NULL;
}

/* Interrupts, each second; a receive still waiting after five ends the
 * program (the check below then failed by hanging). */
static void on_alarm(int signal)
{
	static int count;

	(void)signal;
	if (++count == 5)
		_exit(3);
}

static void set_int(int fd, int level, int name, int value)
{
	CHECK(rsetsockopt(fd, level, name, &value, sizeof(value)) == 0);
}

static int get_int(int fd, int level, int name)
{
	int value = -1;
	socklen_t len = sizeof(value);
	CHECK(rgetsockopt(fd, level, name, &value, &len) == 0);
	return value;
}

/* A new non-blocking rsocket in *fd connecting to `addr`: rconnect must
 * answer EINPROGRESS; the revents rpoll then reports for POLLOUT within
 * 10 s (0 if none). */
static short connect_nonblocking(int *fd, struct sockaddr_in *addr)
{
	struct pollfd pfd;

	*fd = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(*fd >= 0);
	errno = 0;
	CHECK(rconnect(*fd, (struct sockaddr *)addr, sizeof(*addr)) == -1 && errno == EINPROGRESS);
	pfd = (struct pollfd){ .fd = *fd, .events = POLLOUT };
	return rpoll(&pfd, 1, 10000) == 1 ? pfd.revents : 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	struct pollfd fds[2];
	struct stream up, down;
	pthread_t threads[4];
	int listener, client, server, pipefd[2];
	char byte = 'x', buf[64];

	alarm(60);
	signal(SIGPIPE, SIG_IGN);
	if (argc != 2)
		return 2;
	addr.sin_port = htons(atoi(argv[1]));
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

	/* A descriptor that is no rsocket. */
	errno = 0;
	CHECK(rclose(1000) == -1 && errno == EBADF);
	errno = 0;
	CHECK(rrecv(1000, buf, sizeof(buf), 0) == -1 && errno == EBADF);
	errno = 0;
	CHECK(rsend(1000, buf, sizeof(buf), 0) == -1 && errno == EBADF);
	errno = 0;
	CHECK(rsocket(AF_INET, SOCK_DGRAM, 0) == -1 && errno == ENOSYS);

	/* The listener's sockets: small queues and buffers. */
	listener = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(listener >= 0);
	set_int(listener, SOL_SOCKET, SO_REUSEADDR, 1);
	set_int(listener, SOL_RDMA, RDMA_SQSIZE, 24);
	set_int(listener, SOL_RDMA, RDMA_RQSIZE, 40);
	set_int(listener, SOL_SOCKET, SO_RCVBUF, 8192);
	set_int(listener, SOL_SOCKET, SO_SNDBUF, 4096);
	CHECK(get_int(listener, SOL_SOCKET, SO_RCVBUF) == 16384);
	CHECK(rbind(listener, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	CHECK(rlisten(listener, 4) == 0);

	/* The client's: large ones, other depths. */
	client = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(client >= 0);
	set_int(client, SOL_RDMA, RDMA_SQSIZE, 200);
	set_int(client, SOL_RDMA, RDMA_RQSIZE, 17);
	set_int(client, SOL_SOCKET, SO_RCVBUF, 300000);
	set_int(client, SOL_SOCKET, SO_SNDBUF, 70000);
	/* Less inline data than a credit update's buffer entry (16 octets). */
	set_int(client, SOL_RDMA, RDMA_INLINE, 8);
	CHECK(rconnect(client, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	server = raccept(listener, NULL, NULL);
	CHECK(server >= 0);
	/* Sizes are fixed once connected. */
	errno = 0;
	CHECK(rsetsockopt(client, SOL_RDMA, RDMA_SQSIZE, &(int){ 64 }, sizeof(int)) == -1 &&
	      errno == EINVAL);

	/* Nothing queued: a non-blocking receive answers EAGAIN. */
	errno = 0;
	CHECK(rrecv(server, buf, sizeof(buf), MSG_DONTWAIT) == -1 && errno == EAGAIN);
	CHECK(rfcntl(server, F_SETFL, rfcntl(server, F_GETFL) | O_NONBLOCK) == 0);
	CHECK(rfcntl(server, F_GETFL) & O_NONBLOCK);
	errno = 0;
	CHECK(rrecv(server, buf, sizeof(buf), 0) == -1 && errno == EAGAIN);
	CHECK(rfcntl(server, F_SETFL, 0) == 0);

	/* A signal without SA_RESTART interrupts a blocking receive. */
	{
		struct sigaction interrupt = { .sa_handler = on_alarm };

		struct itimerval every_second = { { 1, 0 }, { 1, 0 } }, off = { { 0, 0 }, { 0, 0 } };

		CHECK(sigaction(SIGALRM, &interrupt, NULL) == 0);
		CHECK(setitimer(ITIMER_REAL, &every_second, NULL) == 0);
		errno = 0;
		CHECK(rrecv(server, buf, sizeof(buf), 0) == -1 && errno == EINTR);
		CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
		signal(SIGALRM, SIG_DFL);
		alarm(60);
	}

	/* rpoll over the rsocket and a pipe. */
	CHECK(pipe(pipefd) == 0);
	fds[0] = (struct pollfd){ .fd = server, .events = POLLIN };
	fds[1] = (struct pollfd){ .fd = pipefd[0], .events = POLLIN };
	CHECK(rpoll(fds, 2, 100) == 0);
	CHECK(write(pipefd[1], &byte, 1) == 1);
	CHECK(rpoll(fds, 2, 1000) == 1 && fds[1].revents == POLLIN && fds[0].revents == 0);
	CHECK(read(pipefd[0], &byte, 1) == 1);
	CHECK(rsend(client, "hello", 5, 0) == 5);
	CHECK(rpoll(fds, 2, 5000) == 1 && fds[0].revents == POLLIN && fds[1].revents == 0);
	CHECK(rrecv(server, buf, sizeof(buf), 0) == 5 && memcmp(buf, "hello", 5) == 0);
	/* rselect likewise: the pipe stays quiet, the rsocket turns readable. */
	CHECK(rsend(client, "abc", 3, 0) == 3);
	{
		fd_set readable;
		struct timeval limit = { .tv_sec = 5 };
		int top = (server > pipefd[0] ? server : pipefd[0]) + 1;

		FD_ZERO(&readable);
		FD_SET(server, &readable);
		FD_SET(pipefd[0], &readable);
		CHECK(rselect(top, &readable, NULL, NULL, &limit) == 1);
		CHECK(FD_ISSET(server, &readable) && !FD_ISSET(pipefd[0], &readable));
	}
	CHECK(rrecv(server, buf, sizeof(buf), 0) == 3 && memcmp(buf, "abc", 3) == 0);
	fds[0].events = POLLOUT;
	CHECK(rpoll(fds, 1, 1000) == 1 && fds[0].revents == POLLOUT);

	/* 1 MiB each way at once through the asymmetric buffers. */
	up = (struct stream){ .fd = client, .seed = 3 };
	down = (struct stream){ .fd = server, .seed = 11 };
	struct stream up_rx = { .fd = server, .seed = 3 }, down_rx = { .fd = client, .seed = 11 };
	pthread_create(&threads[0], NULL, send_all, &up);
	pthread_create(&threads[1], NULL, recv_all, &up_rx);
	pthread_create(&threads[2], NULL, send_all, &down);
	pthread_create(&threads[3], NULL, recv_all, &down_rx);
	for (int i = 0; i < 4; i++)
		pthread_join(threads[i], NULL);
	CHECK(up.ok && up_rx.ok && down.ok && down_rx.ok);

	/* The peer closes: what it sent is read, then end of file. */
	CHECK(rsend(client, "bye", 3, 0) == 3);
	CHECK(rclose(client) == 0);
	fds[0] = (struct pollfd){ .fd = server, .events = POLLIN };
	CHECK(rpoll(fds, 1, 5000) == 1 && (fds[0].revents & POLLIN));
	CHECK(rrecv(server, buf, sizeof(buf), 0) == 3 && memcmp(buf, "bye", 3) == 0);
	CHECK(rrecv(server, buf, sizeof(buf), 0) == 0);
	CHECK(rpoll(fds, 1, 5000) == 1 && (fds[0].revents & POLLHUP));
	errno = 0;
	CHECK(rsend(server, "late", 4, 0) == -1 && errno == ECONNRESET);

	/* No iomap was offered (RDMA_IOMAPSIZE 0, the default). */
	errno = 0;
	CHECK(riomap(server, buf, sizeof(buf), PROT_WRITE, 0, -1) == -1 && errno == ENOMEM);
	errno = 0;
	CHECK(riounmap(server, buf, sizeof(buf)) == -1 && errno == EINVAL);
	CHECK(rclose(server) == 0);

	/* A half close: the side that shut its sending down still reads. */
	client = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(client >= 0);
	CHECK(rconnect(client, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	server = raccept(listener, NULL, NULL);
	CHECK(server >= 0);
	CHECK(rsend(client, "last", 4, 0) == 4);
	CHECK(rshutdown(client, SHUT_WR) == 0);
	errno = 0;
	CHECK(rsend(client, "more", 4, 0) == -1 && errno == ECONNRESET);
	CHECK(rrecv(server, buf, sizeof(buf), MSG_WAITALL) == 4 && memcmp(buf, "last", 4) == 0);
	CHECK(rrecv(server, buf, sizeof(buf), 0) == 0);
	CHECK(rsend(server, "reply", 5, 0) == 5);
	CHECK(rrecv(client, buf, sizeof(buf), 0) == 5 && memcmp(buf, "reply", 5) == 0);
	CHECK(rclose(server) == 0);
	CHECK(rrecv(client, buf, sizeof(buf), 0) == 0);
	CHECK(rclose(client) == 0);

	/* A non-blocking connect: EINPROGRESS, then POLLOUT and SO_ERROR 0. */
	CHECK(connect_nonblocking(&client, &addr) == POLLOUT);
	CHECK(get_int(client, SOL_SOCKET, SO_ERROR) == 0);
	server = raccept(listener, NULL, NULL);
	CHECK(server >= 0);
	CHECK(rsend(client, "nb", 2, 0) == 2);
	CHECK(rrecv(server, buf, 2, MSG_WAITALL) == 2 && memcmp(buf, "nb", 2) == 0);
	CHECK(rclose(server) == 0);
	CHECK(rclose(client) == 0);
	CHECK(rclose(listener) == 0);

	/* ... and to a port nobody listens on: POLLERR with errno ECONNREFUSED
	 * (rstream prints it), SO_ERROR ECONNREFUSED. */
	CHECK((connect_nonblocking(&client, &addr) & POLLERR) && errno == ECONNREFUSED);
	CHECK(get_int(client, SOL_SOCKET, SO_ERROR) == ECONNREFUSED);
	CHECK(rclose(client) == 0);
	return finish();
}
