/*
 * uwarp dpdk-sys shim: see shim.h. Compiled by build.rs with the cflags
 * `pkg-config --cflags libdpdk` reports, so the inline bodies are the ones
 * of the DPDK the crate links against.
 */
#include "shim.h"

#include <rte_errno.h>
#include <rte_lcore.h>

uint16_t shim_rte_eth_rx_burst(uint16_t port_id, uint16_t queue_id,
			       struct rte_mbuf **rx_pkts, uint16_t nb_pkts)
{
	return rte_eth_rx_burst(port_id, queue_id, rx_pkts, nb_pkts);
}

uint16_t shim_rte_eth_tx_burst(uint16_t port_id, uint16_t queue_id,
			       struct rte_mbuf **tx_pkts, uint16_t nb_pkts)
{
	return rte_eth_tx_burst(port_id, queue_id, tx_pkts, nb_pkts);
}

uint16_t shim_rte_eth_tx_prepare(uint16_t port_id, uint16_t queue_id,
				 struct rte_mbuf **tx_pkts, uint16_t nb_pkts)
{
	return rte_eth_tx_prepare(port_id, queue_id, tx_pkts, nb_pkts);
}

struct rte_mbuf *shim_rte_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

void shim_rte_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

int shim_rte_pktmbuf_alloc_bulk(struct rte_mempool *pool,
				struct rte_mbuf **mbufs, unsigned int count)
{
	return rte_pktmbuf_alloc_bulk(pool, mbufs, count);
}

char *shim_rte_pktmbuf_mtod(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, char *);
}

uint16_t shim_rte_pktmbuf_headroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_headroom(m);
}

uint16_t shim_rte_pktmbuf_tailroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_tailroom(m);
}

char *shim_rte_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_append(m, len);
}

char *shim_rte_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_prepend(m, len);
}

char *shim_rte_pktmbuf_adj(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_adj(m, len);
}

int shim_rte_pktmbuf_trim(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_trim(m, len);
}

int shim_rte_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail)
{
	return rte_pktmbuf_chain(head, tail);
}

uint16_t shim_rte_mbuf_refcnt_read(const struct rte_mbuf *m)
{
	return rte_mbuf_refcnt_read(m);
}

void shim_rte_pktmbuf_attach_extbuf(struct rte_mbuf *m, void *buf_addr,
				    rte_iova_t buf_iova, uint16_t buf_len,
				    struct rte_mbuf_ext_shared_info *shinfo)
{
	rte_pktmbuf_attach_extbuf(m, buf_addr, buf_iova, buf_len, shinfo);
}

struct rte_mbuf_ext_shared_info *
shim_rte_pktmbuf_ext_shinfo_init_helper(void *buf_addr, uint16_t *buf_len,
					rte_mbuf_extbuf_free_callback_t free_cb,
					void *fcb_opaque)
{
	return rte_pktmbuf_ext_shinfo_init_helper(buf_addr, buf_len, free_cb,
						  fcb_opaque);
}

unsigned int shim_rte_ring_dequeue_burst(struct rte_ring *r, void **obj_table,
					 unsigned int n, unsigned int *available)
{
	return rte_ring_dequeue_burst(r, obj_table, n, available);
}

int shim_rte_errno(void)
{
	return rte_errno;
}

unsigned int shim_rte_lcore_id(void)
{
	return rte_lcore_id();
}
