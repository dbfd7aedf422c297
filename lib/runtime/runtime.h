/* SPDX-License-Identifier: BSD-3-Clause */
/* runtime.h - what the rest of libdpg (the train wing) may ask of a
 * context besides the public API: its last error, device, names, store. */
#ifndef DPG_LIB_RUNTIME_H
#define DPG_LIB_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpg.h"
#include "err.h"

struct dpg_store;
struct dpg_gpumod;

/* all_gather on comm for a thread other than the caller's (zero.c's prefetch):
 * the context's last error belongs to the main thread, so the failure stays in
 * e (0 or a negated dpg_status_t); *seq gets the collective's sequence number
 * on comm.  No argument checks: the caller's buffers are its own. */
int dpg_rt_all_gather(dpg_comm_t *comm, const void *send, void *recv,
		      size_t sendcount, dpg_dtype_t dt, uint64_t *seq,
		      struct dpg_err *e);

/* Whether comm's backend can start an all_gather on a device stream and
 * wait for it later (NCCL): zero.c's stage-3 prefetch without a thread. */
bool dpg_rt_can_start(const dpg_comm_t *comm);
/* Start an all_gather (send != recv) on comm's own device stream, after the
 * work already on the default stream; returns once enqueued, with *ticket
 * for dpg_rt_wait_ticket, which must follow (one in flight per context) and
 * frees it.  Errors stay in e, as dpg_rt_all_gather's. */
int dpg_rt_all_gather_start(dpg_comm_t *comm, const void *send, void *recv,
			    size_t sendcount, dpg_dtype_t dt, void **ticket,
			    uint64_t *seq, struct dpg_err *e);
int dpg_rt_wait_ticket(dpg_comm_t *comm, void *ticket, struct dpg_err *e);

/* After a timeout of a collective on comm that dpg_rt_all_gather ran: what
 * every rank was doing (hang.h), the line the public collectives append to
 * their message after "; the ranks: "; "" when nobody can be asked.  Call
 * it from the thread that owns the context (it uses its store connection);
 * returns within about 2 s. */
void dpg_rt_hang_line(dpg_comm_t *comm, char *out, size_t len);
#define DPG_RT_HANG_LINE_MAX 1536	/* room for any such line */

/* Name of comm ("w", "w.s3.c1"), for messages. */
const char *dpg_rt_comm_name(const dpg_comm_t *comm);

/* Set the context's last error (one line; a trailing newline is dropped). */
void dpg_ctx_seterr(struct dpg_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Append to the context's last error (the same thread that set it). */
void dpg_ctx_adderr(struct dpg_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A public call on ctx succeeded: the last error is "" (NULL: nothing). */
void dpg_ctx_clear_err(struct dpg_ctx *ctx);

/* A collective run outside the public calls (zero.c's prefetch thread)
 * failed: dpg_finalize must not wait for the peers' goodbye. */
void dpg_ctx_set_failed(struct dpg_ctx *ctx);

/* The loaded CUDA module's table (gpumod.h) when the context runs on the
 * NCCL backend, else NULL. */
const struct dpg_gpumod *dpg_ctx_gpumod(const struct dpg_ctx *ctx);

/* The CUDA device of the context's NCCL communicators (-1: none). */
int dpg_ctx_device(const struct dpg_ctx *ctx);

/* "rank R (HOST)", the prefix of every message of ctx. */
const char *dpg_ctx_who(const struct dpg_ctx *ctx);

/* The store key namespace of the job step, e.g. "dpg/123.0" (no slash at
 * the end); "dpg" for a NULL context. */
const char *dpg_ctx_key_ns(const struct dpg_ctx *ctx);

/* Node name of world rank r ("?" when unknown). */
const char *dpg_ctx_rank_host(const struct dpg_ctx *ctx, int r);

/* The context's store client (NULL in a one-process world). */
struct dpg_store *dpg_ctx_store(const struct dpg_ctx *ctx);

#endif
