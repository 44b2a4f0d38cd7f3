/* ibv_reg_mr checks the range as the kernel does when it pins the pages:
 * a range not wholly mapped, or mapped read-only when the region allows
 * local or remote writes, fails with EFAULT; a read-only mapping
 * registered for reading succeeds; a length of 0 or a wrapping range is
 * EINVAL. Also checked: the drop-in library's munmap is the one this
 * program (linked with -libverbs) calls, not libc's. "ok" and 0 when every
 * check holds. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

/* A registration of `len` octets at `addr` that must fail with `errno_expected`. */
static void refused(struct ibv_pd *pd, void *addr, size_t len, int access, int errno_expected)
{
	errno = 0;
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);
	if (mr || errno != errno_expected)
		fprintf(stderr, "ibv_reg_mr(%p, %zu, %#x): %p, errno %d, expected %d\n",
			addr, len, access, (void *)mr, errno, errno_expected);
	CHECK(mr == NULL && errno == errno_expected);
}

/* A registration that must succeed; deregistered at once. */
static void accepted(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);
	CHECK(mr != NULL);
	if (mr)
		CHECK(ibv_dereg_mr(mr) == 0);
}

int main(void)
{
	alarm(30);
	struct ibv_device **devices = ibv_get_device_list(NULL);
	CHECK(devices && devices[0]);
	struct ibv_context *ctx = ibv_open_device(devices[0]);
	CHECK(ctx != NULL);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd != NULL);

	const int write = IBV_ACCESS_LOCAL_WRITE;
	const int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);

	/* Three pages, the middle one unmapped. */
	char *three = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(three != MAP_FAILED);
	CHECK(munmap(three + page, page) == 0);
	refused(pd, three + page, page, write, EFAULT);
	refused(pd, three + page, page, 0, EFAULT);
	refused(pd, three, 3 * page, remote, EFAULT);
	refused(pd, three + page - 1, 2, IBV_ACCESS_REMOTE_READ, EFAULT);
	accepted(pd, three, page, remote);
	accepted(pd, three + 2 * page, page, remote);

	/* A read-only mapping: for reading only. */
	char *ro = mmap(NULL, 2 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	refused(pd, ro, 2 * page, write, EFAULT);
	refused(pd, ro + 10, 100, remote, EFAULT);
	accepted(pd, ro, 2 * page, 0);
	accepted(pd, ro + 10, 100, IBV_ACCESS_REMOTE_READ);

	/* Half writable, half read-only: writable registrations refused. */
	char *mixed = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(mixed != MAP_FAILED);
	CHECK(mprotect(mixed + page, page, PROT_READ) == 0);
	refused(pd, mixed, 2 * page, write, EFAULT);
	accepted(pd, mixed, 2 * page, IBV_ACCESS_REMOTE_READ);
	accepted(pd, mixed, page, remote);

	/* No access at all. */
	char *none = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(none != MAP_FAILED);
	refused(pd, none, page, 0, EFAULT);

	/* The kernel's argument checks. */
	char heap[64];
	refused(pd, heap, 0, write, EINVAL);
	refused(pd, (void *)(UINTPTR_MAX - 15), 32, write, EINVAL);
	refused(pd, NULL, page, write, EFAULT);
	accepted(pd, heap + 1, 7, remote);

	/* The program's munmap is the drop-in library's. */
	Dl_info of_munmap, of_reg_mr;
	CHECK(dladdr((void *)munmap, &of_munmap) != 0);
	CHECK(dladdr((void *)ibv_reg_mr, &of_reg_mr) != 0);
	if (of_munmap.dli_fbase != of_reg_mr.dli_fbase)
		fprintf(stderr, "munmap is %s's, ibv_reg_mr %s's\n", of_munmap.dli_fname,
			of_reg_mr.dli_fname);
	CHECK(of_munmap.dli_fbase == of_reg_mr.dli_fbase);

	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	ibv_free_device_list(devices);
	return finish();
}
