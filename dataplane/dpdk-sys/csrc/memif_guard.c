/*
 * uwarp dpdk-sys: bursts on a net_memif port that its peer's exit cannot
 * tear down underneath.
 *
 * The race (DPDK 22.11, drivers/net/memif). When the peer of a net_memif
 * port closes its end (it stopped its port, exited or was killed), the
 * EAL's interrupt thread runs memif_disconnect: it clears the port's
 * CONNECTED flag, takes and releases the driver's control-channel lock
 * (`cc_lock`), then unmaps the shared memory regions the rings and the
 * packet buffers live in and frees their descriptions. The bursts hold
 * no lock: a burst on a dataplane core that passed its CONNECTED check
 * just before the flag was cleared goes on reading and writing the rings
 * while they are unmapped, and the process dies of SIGSEGV. A process
 * that polls its port while its peer exits can die at any such exit.
 *
 * The guard. Each burst runs holding the same `cc_lock` (taken with a
 * try-lock: a burst while the lock is held moves nothing and the caller
 * polls again). The interrupt thread clears the flag before it takes the
 * lock and unmaps only after it released it, so a burst either holds
 * the lock first, and the unmapping waits for it to end, or starts after
 * the release and sees the flag cleared, and returns without touching a
 * ring (the lock's acquire orders the flag's store before the burst).
 * Other takers of `cc_lock` in 22.11: none (memif_disconnect alone).
 *
 * Stopping and closing. The driver runs memif_disconnect on the
 * application's thread too (rte_eth_dev_stop, rte_eth_dev_close), and
 * memif_free_regions frees and unmaps the regions with no lock: a port
 * stopped while the interrupt thread handles the peer's close (both ends
 * of a link exiting at once) frees them twice, and the process dies.
 * uwarp_memif_dev_stop and uwarp_memif_dev_close run the two on the
 * interrupt thread itself, as an EAL alarm, and wait for them: the two
 * teardowns then run one after the other, and the second finds no
 * region left.
 *
 * Finding the lock. No installed header describes where it is: it is a
 * field of the driver's private data, which the device's data points to,
 * which the ethdev device points to, all three laid out in headers DPDK
 * keeps to itself. Their leading fields are declared below as DPDK 22.11
 * lays them out (later releases insert fields before the lock), and each
 * pointer is followed only once what it leads to matched what the public
 * API says of the port: the device has the port's name, its rte_device
 * and the burst functions and queue arrays rte_eth_dev_start published in
 * rte_eth_fp_ops; its receive queue 0 fills from the pool the port was
 * configured with (a net_memif queue begins with its pool); the private
 * data holds the interface id, role and socket file name of the port's
 * own devargs. Anything else, or a DPDK other than 22.11, and no lock is
 * found: bursts then run unguarded, as before.
 */
#include "memif_guard.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>
#include <rte_kvargs.h>
#include <rte_alarm.h>
#include <rte_interrupts.h>
#include <rte_version.h>
#include <unistd.h>

/*
 * The leading fields of ethdev's `struct rte_eth_dev` and `struct
 * rte_eth_dev_data` (lib/ethdev/ethdev_driver.h, 22.11), which DPDK does
 * not install: a device's burst functions, its data, and in the data the
 * queue arrays and the driver's private data.
 */
struct eth_dev_head {
	void *rx_pkt_burst;
	void *tx_pkt_burst;
	void *tx_pkt_prepare;
	void *rx_queue_count;
	void *rx_descriptor_status;
	void *tx_descriptor_status;
	struct eth_dev_data_head *data;
	void *process_private;
	const void *dev_ops;
	struct rte_device *device;
};

struct eth_dev_data_head {
	char name[RTE_ETH_NAME_MAX_LEN];
	void **rx_queues;
	void **tx_queues;
	uint16_t nb_rx_queues;
	uint16_t nb_tx_queues;
	struct rte_eth_dev_sriov sriov;
	void *dev_private;
};

/* ethdev's lookup of a device by name (exported for drivers). */
struct eth_dev_head *rte_eth_dev_allocated(const char *name);

/* The leading fields of net_memif's `struct pmd_internals` (22.11). */
struct memif_internals_head {
	uint32_t id;
	int role; /* 0 server, 1 client */
	uint32_t flags;
	char *socket_filename;
	char secret[24];
	void *cc;
	rte_spinlock_t cc_lock;
};

_Static_assert(offsetof(struct eth_dev_head, data) == 48 &&
		       offsetof(struct eth_dev_head, device) == 72 &&
		       offsetof(struct eth_dev_data_head, dev_private) == 96,
	       "ethdev's device and device data as DPDK 22.11 lays them out on LP64");
_Static_assert(offsetof(struct memif_internals_head, socket_filename) == 16 &&
		       offsetof(struct memif_internals_head, cc_lock) == 56,
	       "net_memif's pmd_internals as DPDK 22.11 lays it out on LP64");

/* What the port's devargs say, with the driver's defaults. */
struct memif_devargs {
	uint32_t id;
	int role;
	char socket[108];
};

static int read_devargs(const struct rte_device *device,
			struct memif_devargs *out)
{
	const struct rte_devargs *devargs = rte_dev_devargs(device);
	struct rte_kvargs *kv;
	const char *value;

	out->id = 0;
	out->role = 0;
	strcpy(out->socket, "/run/memif.sock");
	if (devargs == NULL || devargs->args == NULL)
		return 0;
	kv = rte_kvargs_parse(devargs->args, NULL);
	if (kv == NULL)
		return -1;
	value = rte_kvargs_get(kv, "id");
	if (value != NULL)
		out->id = (uint32_t)strtoul(value, NULL, 0);
	value = rte_kvargs_get(kv, "role");
	if (value != NULL)
		out->role = strcmp(value, "client") == 0 ? 1 : 0;
	value = rte_kvargs_get(kv, "socket");
	if (value != NULL) {
		if (strlen(value) >= sizeof(out->socket)) {
			rte_kvargs_free(kv);
			return -1;
		}
		strcpy(out->socket, value);
	}
	rte_kvargs_free(kv);
	return 0;
}

rte_spinlock_t *uwarp_memif_guard_lock(uint16_t port_id,
				       const struct rte_mempool *rx_pool)
{
#if RTE_VERSION >= RTE_VERSION_NUM(22, 11, 0, 0) && \
	RTE_VERSION < RTE_VERSION_NUM(23, 0, 0, 0)
	struct rte_eth_dev_info info;
	struct memif_devargs expected;
	char name[RTE_ETH_NAME_MAX_LEN];
	const struct rte_eth_fp_ops *ops;
	struct eth_dev_head *dev;
	struct memif_internals_head *pmd;

	if (port_id >= RTE_MAX_ETHPORTS || rx_pool == NULL)
		return NULL;
	if (rte_eth_dev_info_get(port_id, &info) != 0 ||
	    info.driver_name == NULL ||
	    strcmp(info.driver_name, "net_memif") != 0 ||
	    info.nb_rx_queues == 0 || info.nb_tx_queues == 0 ||
	    rte_eth_dev_get_name_by_port(port_id, name) != 0)
		return NULL;
	if (read_devargs(info.device, &expected) != 0)
		return NULL;
	/* The device, checked against what rte_eth_dev_start published. */
	ops = &rte_eth_fp_ops[port_id];
	dev = rte_eth_dev_allocated(name);
	if (dev == NULL || dev->device != info.device ||
	    (void *)ops->rx_pkt_burst != dev->rx_pkt_burst ||
	    (void *)ops->tx_pkt_burst != dev->tx_pkt_burst ||
	    dev->data == NULL)
		return NULL;
	if (strncmp(dev->data->name, name, sizeof(name)) != 0 ||
	    dev->data->rx_queues != ops->rxq.data ||
	    dev->data->tx_queues != ops->txq.data ||
	    dev->data->nb_rx_queues != info.nb_rx_queues ||
	    dev->data->nb_tx_queues != info.nb_tx_queues ||
	    dev->data->rx_queues == NULL || dev->data->rx_queues[0] == NULL ||
	    /* a net_memif queue begins with its pool */
	    *(struct rte_mempool **)dev->data->rx_queues[0] != rx_pool)
		return NULL;
	/* The driver's private data, checked against the devargs. */
	pmd = dev->data->dev_private;
	if (pmd == NULL || pmd->id != expected.id ||
	    pmd->role != expected.role || pmd->socket_filename == NULL ||
	    strncmp(pmd->socket_filename, expected.socket,
		    sizeof(expected.socket)) != 0)
		return NULL;
	return &pmd->cc_lock;
#else
	(void)port_id;
	(void)rx_pool;
	return NULL;
#endif
}

uint16_t uwarp_memif_guarded_rx_burst(rte_spinlock_t *lock, uint16_t port_id,
				      uint16_t queue_id,
				      struct rte_mbuf **rx_pkts,
				      uint16_t nb_pkts)
{
	uint16_t n;

	if (!rte_spinlock_trylock(lock))
		return 0;
	n = rte_eth_rx_burst(port_id, queue_id, rx_pkts, nb_pkts);
	rte_spinlock_unlock(lock);
	return n;
}

uint16_t uwarp_memif_guarded_tx_burst(rte_spinlock_t *lock, uint16_t port_id,
				      uint16_t queue_id,
				      struct rte_mbuf **tx_pkts,
				      uint16_t nb_pkts)
{
	uint16_t n;

	if (!rte_spinlock_trylock(lock))
		return 0;
	n = rte_eth_tx_burst(port_id, queue_id, tx_pkts, nb_pkts);
	rte_spinlock_unlock(lock);
	return n;
}

/* A stop or close for the interrupt thread, and its outcome. */
struct deferred_teardown {
	uint16_t port_id;
	int close;
	int ret;
	int done;
};

static int teardown(uint16_t port_id, int close)
{
	return close ? rte_eth_dev_close(port_id) : rte_eth_dev_stop(port_id);
}

static void run_teardown(void *arg)
{
	struct deferred_teardown *d = arg;

	d->ret = teardown(d->port_id, d->close);
	__atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
}

static int is_memif(uint16_t port_id)
{
	struct rte_eth_dev_info info;

	return rte_eth_dev_info_get(port_id, &info) == 0 &&
	       info.driver_name != NULL &&
	       strcmp(info.driver_name, "net_memif") == 0;
}

static int teardown_on_interrupt_thread(uint16_t port_id, int close)
{
	struct deferred_teardown d = { port_id, close, 0, 0 };

	if (!is_memif(port_id) || rte_thread_is_intr() ||
	    rte_eal_alarm_set(1, run_teardown, &d) != 0)
		return teardown(port_id, close);
	while (!__atomic_load_n(&d.done, __ATOMIC_ACQUIRE))
		usleep(100);
	return d.ret;
}

int uwarp_memif_is_client(uint16_t port_id)
{
	struct rte_eth_dev_info info;
	struct memif_devargs args;

	return is_memif(port_id) &&
	       rte_eth_dev_info_get(port_id, &info) == 0 &&
	       read_devargs(info.device, &args) == 0 && args.role == 1;
}

int uwarp_memif_dev_stop(uint16_t port_id)
{
	return teardown_on_interrupt_thread(port_id, 0);
}

int uwarp_memif_dev_close(uint16_t port_id)
{
	return teardown_on_interrupt_thread(port_id, 1);
}
