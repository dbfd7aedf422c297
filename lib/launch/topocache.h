/* SPDX-License-Identifier: BSD-3-Clause */
/* topocache.h - the node's topology, discovered once per boot: the first dpg
 * step on a node saves hwloc's XML export in a root-owned directory, later
 * steps load it (after the same forked parse check as an admin's XML).
 *
 * The cache is one file, DIR/topology.cache: the key text (topocache_key.c:
 * boot id, hwloc version, online CPUs, the PCI functions with their ids),
 * then the XML.  A file whose key differs is stale; one that does not parse
 * is corrupt; either is discarded and rebuilt.  The key is compared byte for
 * byte (no hash, no collision).
 *
 * Safety (the file is parsed by root inside slurmstepd): every directory of
 * DIR is walked from "/" with openat(O_NOFOLLOW), and must be owned by root
 * (or `owner`) and not group/other-writable (an ancestor may be a sticky
 * world-writable one such as /tmp: nobody else can replace an entry there);
 * missing directories are created 0755 (DIR itself 0700); the file is opened
 * O_NOFOLLOW, must be a regular file with the same owner rule, and is
 * written as a temporary file in DIR, fsync'd and renamed over the old one. */
#ifndef DPG_LIB_TOPOCACHE_H
#define DPG_LIB_TOPOCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"
#include "topo.h"

#define DPG_TOPO_CACHE_DEFAULT "/var/cache/dpg/topology"
#define DPG_TOPO_CACHE_FILE "topology.cache"
#define DPG_TOPO_CACHE_MAX (64u * 1024u * 1024u)	/* largest file read */
#define DPG_TOPO_PATH_MAX 256		/* longest cache directory */

/* The key text of this node ("dpg-topology-cache 1\n...end\n", malloc'd in
 * *key, *len bytes), read under root ("" or NULL: the real /proc and /sys;
 * tests pass a fake tree). */
int dpg_topo_cache_key(const char *root, char **key, size_t *len, struct dpg_err *err);

/* Open the directory dir (absolute) safely, creating what is missing when
 * create; *fd is an O_DIRECTORY descriptor.  -DPG_ERR_ENV: it does not
 * exist (and !create); -DPG_ERR_INVALID: a component is a symlink, not a
 * directory, has another owner, or is writable by others (err names it);
 * -DPG_ERR_SYSTEM: a system call failed. */
int dpg_topo_cache_dir_open(const char *dir, uid_t owner, bool create, int *fd,
			    struct dpg_err *err);

/* Read the cache file of dirfd: 1 and its XML (malloc'd, NUL-terminated)
 * when its key is key; 0 when there is none; -DPG_ERR_INVALID when it is
 * stale, truncated or unsafe (a symlink, another owner, writable by
 * others): err says which, and the caller discards it. */
int dpg_topo_cache_read(int dirfd, uid_t owner, const char *key, size_t keylen,
			char **xml, size_t *xml_len, struct dpg_err *err);

/* Atomically replace the cache file of dirfd with key + xml. */
int dpg_topo_cache_write(int dirfd, const char *key, size_t keylen,
			 const char *xml, size_t xml_len, struct dpg_err *err);

/* Remove the cache file of dirfd (whatever it is: a symlink is unlinked,
 * never followed).  0 also when there was none. */
int dpg_topo_cache_discard(int dirfd, struct dpg_err *err);

/* How dpg_topo_load_cached should work. */
struct dpg_topo_cache_cfg {
	const char *dir;	/* absolute directory; NULL or "": no cache */
	uid_t owner;		/* accepted owner besides root (slurmstepd: 0) */
	bool may_write;		/* create, save, discard (slurmstepd: euid 0) */
	const char *root;	/* for dpg_topo_cache_key; NULL: the real one */
	int timeout_ms;		/* deadline of the forked parse check */
};

/* This node's topology through the cache: a hit loads the saved XML; a miss,
 * a stale or a corrupt cache discovers the node live and saves it (when
 * may_write).  *hit tells which.  note receives one line for the log when
 * something was discarded or could not be used or saved ("" otherwise);
 * a cache problem never fails the load, only live discovery can. */
int dpg_topo_load_cached(const struct dpg_topo_cache_cfg *c, struct dpg_topo **out,
			 bool *hit, char *note, size_t note_len, struct dpg_err *err);

#endif
