/* SPDX-License-Identifier: BSD-3-Clause */
/* cpu_backend.h - the CPU backend of struct dpg_comm: collectives over TCP
 * between nodes and over shared memory inside a node.
 *
 * Topology, from the node strings exchanged at init:
 *  - every rank on one node: the shared-memory "direct" algorithms of shm.c
 *    (pipelined copy-in / reduce out of shared memory / copy-out);
 *  - otherwise one ring, ordered so that the ranks of a node are adjacent;
 *    each hop is a TCP connection (between nodes) or a shared-memory pipe
 *    (inside a node).  allreduce = ring reduce-scatter + ring all-gather,
 *    streamed: both directions at once from one non-blocking event loop,
 *    a received piece is combined and forwarded while the rest is still on
 *    the wire; broadcast is a pipelined chain from the root.
 * Failures: every wait ends by the call's deadline (args timeout_s), on the
 * abort flag, or when a peer is found dead (socket closed, process gone on
 * this node); the first rank to see a failure floods a notice to the others
 * (TCP notice channels in both ring directions + the node segment), so every
 * surviving rank returns DPG_ERR_PEER naming the dead peer.  A failure is
 * sticky: later calls on the communicator return it again.
 * Matching: every collective carries a stamp (stamp.h: c->seq, kind, count,
 * dtype, op, root) in data already exchanged (the first bytes of each ring
 * hop; a cell beside the rank's slot on shared memory); a difference is
 * DPG_ERR_INVALID naming both calls, flooded like a failure.
 */
#ifndef DPG_LIB_CPU_BACKEND_H
#define DPG_LIB_CPU_BACKEND_H

#include <stddef.h>

#include "backend.h"
#include "err.h"

/* The send buffer of a TCP hop between two ranks of one machine (bytes
 * asked of SO_SNDBUF; cpu_backend.c says why); other hops autotune. */
#define DPG_CPU_LOCAL_SNDBUF (128 << 10)
/* The default lockstep threshold (tcp_lockstep_bytes) of 2 ranks of one
 * machine, which share such a hop (cpu_backend.c: count_cpus). */
#define DPG_CPU_LOCKSTEP_LOCAL_BYTES ((size_t)16 << 20)

/* Flags for dpg_backend_args.flags. */
#define DPG_CPU_RING 0x1u	/* use the ring even when all ranks share a node */
#define DPG_CPU_STREAM 0x2u	/* shm copies into the slots: always streamed */
#define DPG_CPU_NO_STREAM 0x4u	/* ... never (default: when handoffs are slow) */
#define DPG_CPU_NO_CMA 0x8u	/* shm all_gather / broadcast: always through the
				 * slots (default: large ones read in place where
				 * the local ranks can read each other) */

/* The arguments (backend.h) the CPU backend reads: store (unused for size
 * 1), secret (the job secret: keys the authenticated hello of every ring
 * connection; NULL or "" binds it to the receiver's token only), host, node,
 * timeout_s (<= 0: 300), abort, and the optional tuning
 * flags (DPG_CPU_*), shm_slot_bytes (shared-memory stage size: 256 KiB,
 * 1 MiB when ranks outnumber CPUs) and tcp_chunk_bytes (largest single
 * send/recv: 1 MiB) and tcp_lockstep_bytes (broadcasts of at least this
 * many bytes wait on each TCP hop until the reader has entered the call:
 * ring.c's lockstep; SIZE_MAX: never; by default 1 MiB at 2 ranks, 16 MiB
 * where both share a machine, never where a machine's ranks outnumber its
 * CPUs), 0 = default. */

/* For c->rank, c->size and c->name already set: publish this rank's listen
 * address under "<c->name>/cpu/<rank>" in the store, read the others', set
 * up the node segment and the ring connections, and set c->ops / c->impl.
 * Collective: every rank of the communicator calls it.  Returns 0 or a
 * negated dpg_status_t with err filled in; on failure c->ops is untouched
 * and nothing is leaked. */
int dpg_cpu_comm_init(struct dpg_comm *c, const struct dpg_backend_args *a,
		      struct dpg_err *err);

#endif
