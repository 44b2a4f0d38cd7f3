/*
 * uwarp dpdk-sys: bursts on a net_memif port that its peer's exit cannot
 * tear down underneath (see memif_guard.c for the race and the guard).
 */
#ifndef UWARP_MEMIF_GUARD_H
#define UWARP_MEMIF_GUARD_H

#include <stdint.h>
#include <rte_config.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_spinlock.h>

/*
 * The lock net_memif's teardown takes on port `port_id`, a started
 * net_memif port whose receive queue 0 fills from `rx_pool`; NULL when
 * the port is not net_memif, or its driver is not laid out as DPDK 22.11
 * lays it out (checked against the port's own devargs and pool).
 */
rte_spinlock_t *uwarp_memif_guard_lock(uint16_t port_id,
				       const struct rte_mempool *rx_pool);

/* rte_eth_rx_burst under `lock`: 0 packets while the lock is held. */
uint16_t uwarp_memif_guarded_rx_burst(rte_spinlock_t *lock, uint16_t port_id,
				      uint16_t queue_id,
				      struct rte_mbuf **rx_pkts,
				      uint16_t nb_pkts);

/* rte_eth_tx_burst under `lock`: 0 packets taken while the lock is held. */
uint16_t uwarp_memif_guarded_tx_burst(rte_spinlock_t *lock, uint16_t port_id,
				      uint16_t queue_id,
				      struct rte_mbuf **tx_pkts,
				      uint16_t nb_pkts);

/* 1 if the port is net_memif with `role=client` in its devargs, else 0. */
int uwarp_memif_is_client(uint16_t port_id);

/*
 * rte_eth_dev_stop and rte_eth_dev_close; on a net_memif port they run on
 * the EAL's interrupt thread (an alarm), where the driver also handles
 * its peer's close, so the two teardowns never run at once (called from
 * that thread, or where no alarm can be set, they run in place).
 */
int uwarp_memif_dev_stop(uint16_t port_id);
int uwarp_memif_dev_close(uint16_t port_id);

#endif
