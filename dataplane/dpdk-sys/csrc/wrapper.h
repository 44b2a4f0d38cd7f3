/*
 * The DPDK headers uwarp binds. Keep this list short: bindgen parses
 * everything included here, and build.rs allowlists what it emits.
 */
#include <rte_config.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_memory.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>
#include <rte_ring.h>
#include <rte_eth_ring.h>
#include <rte_bus_vdev.h>
#include <rte_dev.h>
#include <rte_bus.h>
#include <rte_vfio.h>

#include "shim.h"
#include "memif_guard.h"
