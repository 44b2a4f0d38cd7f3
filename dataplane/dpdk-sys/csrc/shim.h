/*
 * uwarp dpdk-sys shim: non-inline wrappers around the static inline
 * functions and macros of DPDK that Rust cannot call directly.
 *
 * Every function here is a one-line forward to the DPDK function of the
 * same name without the `shim_` prefix; see DPDK's documentation of that
 * function for its contract.
 */
#ifndef UWARP_DPDK_SHIM_H
#define UWARP_DPDK_SHIM_H

#include <stdint.h>
#include <rte_config.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

/* ethdev fast path */
uint16_t shim_rte_eth_rx_burst(uint16_t port_id, uint16_t queue_id,
			       struct rte_mbuf **rx_pkts, uint16_t nb_pkts);
uint16_t shim_rte_eth_tx_burst(uint16_t port_id, uint16_t queue_id,
			       struct rte_mbuf **tx_pkts, uint16_t nb_pkts);
uint16_t shim_rte_eth_tx_prepare(uint16_t port_id, uint16_t queue_id,
				 struct rte_mbuf **tx_pkts, uint16_t nb_pkts);

/* mbuf allocation */
struct rte_mbuf *shim_rte_pktmbuf_alloc(struct rte_mempool *mp);
void shim_rte_pktmbuf_free(struct rte_mbuf *m);
int shim_rte_pktmbuf_alloc_bulk(struct rte_mempool *pool,
				struct rte_mbuf **mbufs, unsigned int count);

/* mbuf data */
char *shim_rte_pktmbuf_mtod(struct rte_mbuf *m);
uint16_t shim_rte_pktmbuf_headroom(const struct rte_mbuf *m);
uint16_t shim_rte_pktmbuf_tailroom(const struct rte_mbuf *m);
char *shim_rte_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
char *shim_rte_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len);
char *shim_rte_pktmbuf_adj(struct rte_mbuf *m, uint16_t len);
int shim_rte_pktmbuf_trim(struct rte_mbuf *m, uint16_t len);
int shim_rte_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail);
uint16_t shim_rte_mbuf_refcnt_read(const struct rte_mbuf *m);

/* external buffers */
void shim_rte_pktmbuf_attach_extbuf(struct rte_mbuf *m, void *buf_addr,
				    rte_iova_t buf_iova, uint16_t buf_len,
				    struct rte_mbuf_ext_shared_info *shinfo);
struct rte_mbuf_ext_shared_info *
shim_rte_pktmbuf_ext_shinfo_init_helper(void *buf_addr, uint16_t *buf_len,
					rte_mbuf_extbuf_free_callback_t free_cb,
					void *fcb_opaque);

/* rings */
unsigned int shim_rte_ring_dequeue_burst(struct rte_ring *r, void **obj_table,
					 unsigned int n, unsigned int *available);

/* per-thread state */
int shim_rte_errno(void);
unsigned int shim_rte_lcore_id(void);

#endif
