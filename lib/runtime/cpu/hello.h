/* hello.h - the CPU backend's rendezvous on the wire: the address record a
 * rank publishes in the store, and the hello that opens every TCP hop. */
#ifndef DPG_LIB_CPU_HELLO_H
#define DPG_LIB_CPU_HELLO_H

#include <stdint.h>

#define DPG_CPU_WIRE_MAGIC "dpgcpu1"
#define DPG_CPU_HOST_MAX 256

/* What a rank publishes in the store under "<comm name>/cpu/<rank>". */
struct dpg_cpu_wire {
	char magic[8];
	uint32_t port;		/* our data port (the hops connect to it) */
	int32_t pid;
	uint64_t token;		/* peers must present it when they connect */
	uint64_t pidns;		/* inode of /proc/self/ns/pid */
	uint64_t cpus[16];	/* affinity mask (CPUs 0..1023) */
	char uts[64];		/* gethostname: the physical machine */
	char host[DPG_CPU_HOST_MAX];
	char node[DPG_CPU_HOST_MAX];
};

#endif
