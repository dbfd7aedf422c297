/* SPDX-License-Identifier: BSD-3-Clause */
/* shm_seg.c - the node segment's life: its geometry, creation by local index
 * 0, attachment by the others, unlinking and closing (see shm.h). */
#include "shm_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "net.h"
#include "reduce.h"
#include "store.h"

/* ------------------------------------------------------------ segment */

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

static int ncpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		n = CPU_COUNT(&set);
		if (n > 0)
			return n;
	}
	n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? n : 1;
}

static size_t seg_layout(const struct dpg_shm *s, size_t *ctl_off, size_t *data_off)
{
	size_t data;

	*ctl_off = shm_round_up(sizeof(struct shm_hdr), 4096);
	*data_off = shm_round_up(*ctl_off + (size_t)s->n * sizeof(struct shm_ctl), 4096);
	if (s->mode == DPG_SHM_DIRECT)
		data = (size_t)s->K * (size_t)s->n * (s->S + SHM_CL);	/* + stamps */
	else
		data = (size_t)s->n * s->P;
	return *data_off + shm_round_up(data, 4096);
}

/* Free a segment handle in any state dpg_shm_open leaves it in. */
void shm_free(struct dpg_shm *s)
{
	int q;

	if (s == NULL)
		return;
	dpg_shm_unlink(s);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	if (s->base != NULL)
		munmap(s->base, s->size);
	if (s->pidfds != NULL)
		for (q = 0; q < s->n; q++)
			if (s->pidfds[q] >= 0)
				close(s->pidfds[q]);
	free(s->ranks);
	free(s->pids);
	free(s->pidfds);
	free(s->srcs);
	free(s);
}

/* The handle from cfg: local ranks, pids, and the segment's geometry
 * (slot sets K of S bytes, pipes of P bytes), nothing mapped yet. */
static int shm_new(const struct dpg_shm_cfg *cfg, struct dpg_shm **out, struct dpg_err *err)
{
	struct dpg_shm *s = calloc(1, sizeof(*s));
	int q;

	*out = s;
	if (s == NULL)
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory");
	s->lock_fd = -1;
	s->mode = cfg->mode;
	s->n = cfg->nlocal;
	s->me = cfg->lrank;
	s->self = cfg->self;
	s->hosts = cfg->hosts;
	s->nranks = cfg->nranks > 0 ? cfg->nranks
		  : cfg->mode == DPG_SHM_DIRECT ? cfg->nlocal : INT_MAX;
	s->creator = cfg->lrank == 0;
	s->pid_ok = cfg->pid_ok;
	s->oversub = cfg->oversub >= 0 ? cfg->oversub != 0 : s->n > ncpus();
	s->stream = cfg->stream > 0 ? 1 : cfg->stream < 0 ? -1 : 0;
	s->cma_want = cfg->cma >= 0 && cfg->pid_ok;
	s->ranks = calloc((size_t)s->n, sizeof(*s->ranks));
	s->pids = calloc((size_t)s->n, sizeof(*s->pids));
	s->pidfds = calloc((size_t)s->n, sizeof(*s->pidfds));
	s->srcs = calloc((size_t)s->n, sizeof(*s->srcs));
	if (s->ranks == NULL || s->pids == NULL || s->pidfds == NULL || s->srcs == NULL) {
		free(s->pidfds);	/* not yet -1: shm_free must not close them */
		s->pidfds = NULL;
		return dpg_errs(err, DPG_ERR_NOMEM, "out of memory");
	}
	for (q = 0; q < s->n; q++) {
		s->ranks[q] = cfg->ranks[q];
		s->pids[q] = cfg->pids[q];
		s->pidfds[q] = -1;
	}
	/* the stages run one ahead of each other: at least 3 sets; by default
	 * enough sets for SHM_RING_BYTES of slots per rank, at most
	 * SHM_MAX_SETS (then fewer sets, then smaller slots, while the segment
	 * is over SHM_MAX_SEGMENT) */
	s->S = cfg->slot_bytes > 0 ? cfg->slot_bytes
		: s->oversub ? SHM_DEFAULT_SLOT_OVERSUB : SHM_DEFAULT_SLOT;
	s->S = shm_round_up(s->S, 4096);
	s->K = cfg->nsets >= 3 ? cfg->nsets : SHM_DEFAULT_SETS;
	if (cfg->nsets < 3 && s->S < SHM_RING_BYTES / SHM_DEFAULT_SETS)
		s->K = s->S < SHM_RING_BYTES / SHM_MAX_SETS ? SHM_MAX_SETS
			: (int)(SHM_RING_BYTES / s->S);
	while (s->K > SHM_DEFAULT_SETS && cfg->nsets < 3 &&
	       (size_t)s->K * (size_t)s->n * s->S > SHM_MAX_SEGMENT)
		s->K /= 2;
	while (s->S > 64u << 10 && (size_t)s->K * (size_t)s->n * s->S > SHM_MAX_SEGMENT)
		s->S /= 2;
	s->P = shm_round_up(cfg->pipe_bytes > 0 ? cfg->pipe_bytes : SHM_DEFAULT_PIPE, 4096);
	s->pipe_to = cfg->pipe_to;
	s->pipe_from = cfg->pipe_from;
	return 0;
}

/* Map s->size bytes of fd (and close fd either way). */
static int seg_map(struct dpg_shm *s, int fd, struct dpg_err *err)
{
	void *base = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			  fd, 0);
	int rc = 0;

	if (base == MAP_FAILED)
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "mmap of the shared segment (%zu bytes): %s",
			      s->size, strerror(errno));
	else
		s->base = base;
	close(fd);
	return rc;
}

/* Reserve the segment's memory now: tmpfs allocates pages on first touch,
 * and a page it cannot allocate then is a SIGBUS with no message. */
static int seg_reserve(struct dpg_shm *s, int fd, struct dpg_err *err)
{
	struct statvfs vfs;
	int e;

	do
		e = posix_fallocate(fd, 0, (off_t)s->size);
	while (e == EINTR);
	if (e == 0 || e == EOPNOTSUPP || e == ENOSYS)	/* not tmpfs: as before */
		return 0;
	if (e != ENOSPC)
		return dpg_errs(err, DPG_ERR_SYSTEM, "cannot reserve %zu bytes for the shared "
				"segment in /dev/shm: %s", s->size, strerror(e));
	if (statvfs("/dev/shm", &vfs) != 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "/dev/shm is full: the node's shared "
				"segment needs %zu bytes (%.1f MiB)", s->size,
				(double)s->size / 1048576.0);
	return dpg_errs(err, DPG_ERR_SYSTEM, "/dev/shm is full: the node's shared segment "
			"needs %zu bytes (%.1f MiB), %llu bytes free of %llu (enlarge /dev/shm "
			"or use smaller slots)", s->size, (double)s->size / 1048576.0,
			(unsigned long long)vfs.f_bavail * vfs.f_frsize,
			(unsigned long long)vfs.f_blocks * vfs.f_frsize);
}

/* Lock the new file for this process's life (a second descriptor keeps the
 * lock once the mapping's is closed): dpg_shm_sweep leaves a locked file be. */
static int seg_lock(struct dpg_shm *s, int fd, struct dpg_err *err)
{
	int e;

	do
		e = flock(fd, LOCK_EX);
	while (e != 0 && errno == EINTR);
	if (e == 0)
		s->lock_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (e != 0 || s->lock_fd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "cannot lock the shared segment %s: %s",
				s->name, strerror(errno));
	return 0;
}

/* A fresh name, the file created exclusively (0600), locked, sized and
 * reserved. */
static int seg_file(struct dpg_shm *s, int *fdp, struct dpg_err *err)
{
	unsigned rnd = (unsigned)getpid() ^ (unsigned)dpg_now_ns();
	int tries, fd = -1, rc = 0;

	for (tries = 0; tries < 16; tries++) {
		rnd = rnd * 1103515245u + 12345u;
		snprintf(s->name, sizeof(s->name), "/dpg.%d.%08x", (int)getpid(), rnd);
		fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM, "shm_open %s: %s", s->name, strerror(errno));
	s->created = true;
	rc = seg_lock(s, fd, err);
	if (rc == 0 && ftruncate(fd, (off_t)s->size) != 0)
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "cannot size the shared segment to %zu "
			      "bytes: %s (is /dev/shm large enough?)", s->size, strerror(errno));
	if (rc == 0)
		rc = seg_reserve(s, fd, err);
	if (rc != 0)
		close(fd);
	else
		*fdp = fd;
	return rc;
}

static void seg_header(struct dpg_shm *s, size_t ctl_off, size_t data_off)
{
	s->hdr = s->base;
	s->hdr->size = s->size;
	s->hdr->version = SHM_VERSION;
	s->hdr->mode = (uint32_t)s->mode;
	s->hdr->nlocal = (uint32_t)s->n;
	s->hdr->nsets = (uint32_t)s->K;
	s->hdr->slot_bytes = s->S;
	s->hdr->pipe_bytes = s->P;
	s->hdr->ctl_off = ctl_off;
	s->hdr->data_off = data_off;
	/* stages under a slot overlap copies on different CPUs: none to
	 * overlap on when the ranks outnumber them */
	s->hdr->split = !s->oversub;
	atomic_store(&s->hdr->attached, 1);
	atomic_store_explicit(&s->hdr->magic, SHM_MAGIC, memory_order_release);
}

/* Tell the attachers why there is no segment: "!" and the message under
 * the key, in place of the name (best effort). */
static void seg_publish_error(const struct dpg_shm_cfg *cfg, const struct dpg_err *err)
{
	char val[DPG_ERR_MSG_MAX + 1];

	if (err == NULL)
		return;
	snprintf(val, sizeof(val), "!%s", err->msg);
	(void)dpg_store_set(cfg->store, cfg->key, val, strlen(val) + 1, cfg->deadline_ms, NULL);
}

/* Local index 0: create the segment under a fresh name, reserve and map
 * it, write the header, and publish the name (or the error) under cfg->key. */
static int seg_create(struct dpg_shm *s, const struct dpg_shm_cfg *cfg, size_t ctl_off,
		      size_t data_off, struct dpg_err *err)
{
	int fd = -1, rc;

	/* names that creators killed in an earlier rendezvous left behind */
	(void)dpg_shm_sweep("/dev/shm", 2.0);
	rc = seg_file(s, &fd, err);
	if (rc == 0)
		rc = seg_map(s, fd, err);
	if (rc != 0) {
		seg_publish_error(cfg, err);
		return rc;
	}
	seg_header(s, ctl_off, data_off);
	rc = dpg_store_set(cfg->store, cfg->key, s->name, strlen(s->name) + 1,
			   cfg->deadline_ms, err);
	if (rc != 0)
		dpg_err_prefix(err, "publishing the shared segment");
	return rc;
}

/* The segment's name as local index 0 published it. */
static int seg_lookup(struct dpg_shm *s, const struct dpg_shm_cfg *cfg, struct dpg_err *err)
{
	void *val = NULL;
	size_t len = 0;
	int rc;

	rc = dpg_store_get(cfg->store, cfg->key, &val, &len, cfg->deadline_ms, err);
	if (rc != 0) {
		dpg_err_prefix(err, "looking up the shared segment");
		return rc;
	}
	if (len > 1 && ((char *)val)[0] == '!' && ((char *)val)[len - 1] == '\0') {
		rc = dpg_errs(err, DPG_ERR_SYSTEM, "peer rank %d (%s) could not create the "
			      "node's shared segment: %s", s->ranks[0], s->hosts[s->ranks[0]],
			      (char *)val + 1);
		free(val);
		return rc;
	}
	if (len == 0 || len > sizeof(s->name) || ((char *)val)[len - 1] != '\0') {
		free(val);
		return dpg_errs(err, DPG_ERR_PEER, "bad shared segment name from peer rank %d (%s)",
				s->ranks[0], s->hosts[s->ranks[0]]);
	}
	memcpy(s->name, val, len);
	free(val);
	return 0;
}

/* Count this rank in; the last of the node's ranks removes the name at
 * once (everyone has it mapped), so a kill from here on (SIGTERM from
 * scancel during the rest of the rendezvous) leaves nothing in /dev/shm. */
static void seg_signed_in(struct dpg_shm *s)
{
	if (atomic_fetch_add(&s->hdr->attached, 1) + 1 != (uint32_t)s->n)
		return;
	if (shm_unlink(s->name) == 0 || errno == ENOENT)
		atomic_store(&s->hdr->gone, 1);
}

/* Other local ranks: open and map the segment local index 0 created, and
 * check that it was made for the same settings. */
static int seg_attach(struct dpg_shm *s, const struct dpg_shm_cfg *cfg, struct dpg_err *err)
{
	struct stat st;
	int fd, rc;

	rc = seg_lookup(s, cfg, err);
	if (rc != 0)
		return rc;
	fd = shm_open(s->name, O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return dpg_errs(err, DPG_ERR_SYSTEM,
				"shm_open %s (created by peer rank %d (%s)): %s", s->name,
				s->ranks[0], s->hosts[s->ranks[0]], strerror(errno));
	if (fstat(fd, &st) != 0 || (size_t)st.st_size != s->size) {
		rc = dpg_errs(err, DPG_ERR_PEER, "shared segment %s has %lld bytes, expected %zu "
			      "(peer rank %d (%s) runs another configuration?)", s->name,
			      (long long)st.st_size, s->size, s->ranks[0], s->hosts[s->ranks[0]]);
		close(fd);
		return rc;
	}
	rc = seg_map(s, fd, err);
	if (rc != 0)
		return rc;
	s->hdr = s->base;
	if (atomic_load_explicit(&s->hdr->magic, memory_order_acquire) != SHM_MAGIC ||
	    s->hdr->nlocal != (uint32_t)s->n || s->hdr->mode != (uint32_t)s->mode ||
	    s->hdr->slot_bytes != s->S || s->hdr->pipe_bytes != s->P ||
	    s->hdr->nsets != (uint32_t)s->K)
		return dpg_errs(err, DPG_ERR_PEER,
				"shared segment %s does not match this rank's settings", s->name);
	seg_signed_in(s);
	return 0;
}

/* Mapped: find the control lines and the data, sign in, watch the peers. */
static void seg_start(struct dpg_shm *s, size_t ctl_off, size_t data_off)
{
	int q;

	s->split = s->hdr->split != 0;
	s->ctl = (struct shm_ctl *)(void *)((char *)s->base + ctl_off);
	s->data = (char *)s->base + data_off;
	if (s->mode == DPG_SHM_DIRECT)
		s->stamps = s->data + (size_t)s->K * (size_t)s->n * s->S;
	s->ctl[s->me].pid = (int32_t)getpid();
	if (s->pid_ok)
		for (q = 0; q < s->n; q++)
			if (q != s->me && s->pids[q] > 0)
				s->pidfds[q] = pidfd_open_(s->pids[q]);
	/* start positions: every counter starts at 0 in a fresh segment */
	s->last_health_ms = dpg_now_ms();
}

int dpg_shm_open(struct dpg_shm **out, const struct dpg_shm_cfg *cfg, struct dpg_err *err)
{
	struct dpg_shm *s;
	size_t ctl_off, data_off;
	int rc;

	*out = NULL;
	if (cfg->nlocal < 2 || cfg->lrank < 0 || cfg->lrank >= cfg->nlocal)
		return dpg_errs(err, DPG_ERR_INVALID, "shm: bad local rank %d of %d",
				cfg->lrank, cfg->nlocal);
	rc = shm_new(cfg, &s, err);
	if (rc == 0) {
		s->size = seg_layout(s, &ctl_off, &data_off);
		rc = s->creator ? seg_create(s, cfg, ctl_off, data_off, err)
				: seg_attach(s, cfg, err);
	}
	if (rc != 0) {
		shm_free(s);
		return rc;
	}
	seg_start(s, ctl_off, data_off);
	*out = s;
	return 0;
}

void dpg_shm_unlink(struct dpg_shm *s)
{
	if (s != NULL && s->created && !s->unlinked) {
		/* the last attacher normally did: then the name may be
		 * someone else's by now */
		if (s->hdr == NULL || atomic_load(&s->hdr->gone) == 0)
			shm_unlink(s->name);
		s->unlinked = true;
	}
}

void dpg_shm_close(struct dpg_shm *s)
{
	shm_free(s);
}
