/* The device-level verbs as an application calls them, through the
 * installed <infiniband/verbs.h> (so its inline functions too), run on
 * uwarp's libibverbs.so.1 by uwarp-run. Every check that fails prints
 * what it expected and the program exits 1; "ok" and 0 when all hold. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "check.h"

int main(void)
{
	int num = -1;
	struct ibv_device **list = ibv_get_device_list(&num);
	CHECK(list != NULL);
	CHECK(num == 1);
	CHECK(list[1] == NULL);
	struct ibv_device *dev = list[0];
	CHECK(strcmp(ibv_get_device_name(dev), "uwarp0") == 0);
	CHECK(dev->node_type == IBV_NODE_RNIC);
	CHECK(dev->transport_type == IBV_TRANSPORT_IWARP);
	CHECK(strcmp(ibv_node_type_str(dev->node_type), "iWARP NIC") == 0);
	CHECK(ibv_get_device_guid(dev) != 0);

	errno = 0;
	CHECK(ibv_open_device(NULL) == NULL && errno == EINVAL);

	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx != NULL);
	if (!ctx)
		return 1;
	/* Freeing the list leaves the device and the context valid. */
	ibv_free_device_list(list);
	CHECK(ctx->device == dev);
	CHECK(ctx->num_comp_vectors >= 1);

	struct ibv_device_attr attr;
	memset(&attr, 0xa5, sizeof(attr));
	CHECK(ibv_query_device(ctx, &attr) == 0);
	CHECK(attr.phys_port_cnt == 1);
	CHECK(attr.max_qp_rd_atom > 0 && attr.max_qp_init_rd_atom > 0);
	CHECK(attr.max_qp_wr >= 1800);
	CHECK(attr.vendor_id == 0 && attr.vendor_part_id == 0);
	CHECK(attr.atomic_cap == IBV_ATOMIC_NONE);
	CHECK(strncmp(attr.fw_ver, "uwarp", 5) == 0);

	/* The inline ibv_query_device_ex falls back to ibv_query_device. */
	struct ibv_device_attr_ex attr_ex;
	CHECK(ibv_query_device_ex(ctx, NULL, &attr_ex) == 0);
	CHECK(attr_ex.orig_attr.max_qp_wr == attr.max_qp_wr);

	/* The inline ibv_query_port calls the extended context's query_port
	 * with the whole structure... */
	struct ibv_port_attr port;
	memset(&port, 0xa5, sizeof(port));
	CHECK(ibv_query_port(ctx, 1, &port) == 0);
	CHECK(port.state == IBV_PORT_ACTIVE);
	CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
	CHECK(port.gid_tbl_len == 1);
	CHECK(port.flags == 0 && port.port_cap_flags2 == 0);
	CHECK(ibv_query_port(ctx, 2, &port) == EINVAL);

	/* ...and the exported function, which old binaries call, writes only
	 * the shorter compat structure. */
	memset(&port, 0xa5, sizeof(port));
	CHECK((ibv_query_port)(ctx, 1, (struct _compat_ibv_port_attr *)&port) == 0);
	CHECK(port.state == IBV_PORT_ACTIVE);
	CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
	CHECK(port.flags == 0xa5);

	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
	CHECK(gid.raw[0] != 0 || gid.raw[1] != 0 || gid.raw[5] != 0);
	errno = 0;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == -1 && errno == EINVAL);
	__be16 pkey;
	CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0 && pkey == 0xffff);

	/* The asynchronous event descriptor is a real one: non-blocking, it
	 * says there is nothing to read. */
	CHECK(fcntl(ctx->async_fd, F_SETFL, O_NONBLOCK) == 0);
	char byte;
	errno = 0;
	CHECK(read(ctx->async_fd, &byte, 1) == -1 && errno == EAGAIN);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd != NULL && pd->context == ctx);
	struct ibv_pd *other = ibv_alloc_pd(ctx);
	CHECK(other != NULL && other->handle != pd->handle);
	CHECK(ibv_dealloc_pd(other) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);

	CHECK(ibv_fork_init() == 0);
	CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED);
	CHECK(strcmp(ibv_wc_status_str(IBV_WC_SUCCESS), "success") == 0);
	CHECK(strcmp(ibv_wc_status_str(1000), "unknown") == 0);
	CHECK(strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active") == 0);
	CHECK(strcmp(ibv_event_type_str(IBV_EVENT_COMM_EST), "communication established") == 0);

	CHECK(ibv_close_device(ctx) == 0);
	return finish();
}
