#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# taskenv.sh - run as a task under srun: print ONE line describing this task
# (what Slurm says it is, and every variable of dpg's contract), for
# check_contract.py (also the binding variables and E2E_CPUS_ALLOWED, the
# task's Cpus_allowed_list).  Format: "DPGE2E" then TAB-separated NAME=VALUE fields;
# unset variables are left out.
#   --resolve        also resolve MASTER_ADDR here (getent) into E2E_RESOLVED
#   --touch FILE     create FILE after printing (rendezvous of concurrent steps)
#   --wait FILE      then wait up to 20 s for FILE to exist (fail if it never does)
resolve=0 touch= wait=
while [ $# -gt 0 ]; do
	case $1 in
	--resolve) resolve=1;;
	--touch) touch=$2; shift;;
	--wait) wait=$2; shift;;
	*) echo "taskenv.sh: unknown argument $1" >&2; exit 2;;
	esac
	shift
done
line=DPGE2E
TAB=$(printf '\t')
# (keep the line under 1024 bytes: slurmstepd forwards output in messages of
# at most 1024 bytes, and pieces of a longer line interleave with other tasks')
VARS="SLURM_JOB_ID SLURM_STEP_ID SLURM_PROCID SLURM_LOCALID SLURM_NODEID \
	SLURM_STEP_NODELIST SLURM_STEP_TASKS_PER_NODE SLURM_DISTRIBUTION \
	SLURM_DIST_PLANESIZE SLURM_STEP_RESV_PORTS SLURMD_NODENAME \
	RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE NODE_RANK GROUP_RANK \
	GROUP_WORLD_SIZE ROLE_RANK ROLE_WORLD_SIZE ROLE_NAME MASTER_ADDR MASTER_PORT \
	TORCHELASTIC_USE_AGENT_STORE TORCHELASTIC_RUN_ID TORCHELASTIC_RESTART_COUNT \
	TORCHELASTIC_MAX_RESTARTS TORCHELASTIC_ERROR_FILE \
	JAX_COORDINATOR_ADDRESS JAX_LOCAL_DEVICE_IDS \
	DPG_CONTRACT DPG_RANK DPG_WORLD_SIZE DPG_LOCAL_RANK DPG_LOCAL_WORLD_SIZE \
	DPG_NODE_RANK DPG_NUM_NODES DPG_MASTER_ADDR DPG_MASTER_PORT DPG_JOB_ID \
	DPG_STEP_ID DPG_GPUS_PER_TASK \
	DPG_GPU_VISIBILITY DPG_GPUS DPG_NICS DPG_CPUS DPG_NUMA \
	CUDA_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES CUDA_DEVICE_ORDER GPU_DEVICE_ORDINAL \
	SLURM_STEP_GPUS UCX_NET_DEVICES NCCL_IB_HCA \
	NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME OMP_NUM_THREADS"
for v in $VARS; do
	eval "isset=\${$v+x}"
	[ -n "$isset" ] || continue
	eval "val=\$$v"
	line="$line$TAB$v=$val"
done
# any other DPG_* the plugin may add (listed, not checked)
extra= known=" $(echo $VARS) "
for v in $(env | sed -n 's/^\(DPG_[A-Z0-9_]*\)=.*/\1/p' | sort); do
	case $known in *" $v "*) ;; *) extra=$extra$v,;; esac
done
# the CPUs this task may run on (sed inherits the task's affinity)
aff=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
line="$line${TAB}E2E_DPG_VARS=$extra${TAB}E2E_HOST=$(hostname)${TAB}E2E_CPUS_ALLOWED=$aff"
if [ $resolve = 1 ] && [ -n "${MASTER_ADDR:-}" ]; then
	ip=$(getent hosts "$MASTER_ADDR" | awk '{print $1; exit}')
	line="$line${TAB}E2E_RESOLVED=${ip:-FAILED}${TAB}E2E_ADDRS=$(hostname -I 2>/dev/null)"
fi
[ ${#line} -lt 1000 ] ||
	echo "taskenv.sh: a ${#line}-byte line: slurmstepd may split it (1024-byte messages)" >&2
printf '%s\n' "$line"
[ -n "$touch" ] && : >"$touch"
if [ -n "$wait" ]; then
	i=0
	while [ ! -e "$wait" ]; do
		i=$((i + 1)); [ $i -gt 200 ] && { echo "taskenv.sh: $wait never appeared" >&2; exit 1; }
		sleep 0.1
	done
fi
exit 0
