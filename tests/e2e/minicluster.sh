#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# minicluster.sh - start a throw-away, real Slurm cluster on this one machine.
#
# Needs (Debian 12 / Slurm 22.05): slurmctld slurmd slurm-client munge, root.
#
# Everything lives in $LAB_DIR (default: a fresh mktemp dir): slurm.conf,
# plugstack.conf, munge key/socket, state, spool, logs, pid files.  Nothing
# under /etc is ever written and no system service is started or stopped.
#
# Default mode: NODES virtual nodes n1..nN, one slurmd each (Debian's slurmd is
# built with multiple-slurmd support), all on 127.0.0.1, ports
# SLURMD_PORT..SLURMD_PORT+N-1.  With PRIVATE_HOSTS=1 (default) every daemon
# runs in a private mount namespace in which /etc/hosts is bind-mounted to a
# copy that also maps n1..nN to 127.0.0.1, so tasks (children of slurmstepd)
# resolve node names (MASTER_ADDR=n1).  The system /etc/hosts is untouched.
#
# NETNS=1: every node is a separate "host": its own network namespace (a veth
# on a private bridge, address $NETNS_NET.1<i>), its own UTS hostname n<i> and
# its own /etc/hosts view.  slurmctld and munged stay in the root namespace on
# $NETNS_NET.1.  Nothing ever leaves the machine.
#
# Knobs (environment):
#   LAB_DIR          directory to use (created; default mktemp -d under TMPDIR)
#   NODES            number of nodes, 1..9 (default 3)
#   CPUS             CPUs per node as Slurm sees them (default 4; overrides hw)
#   CTLD_PORT        slurmctld port (default 6817)
#   SLURMD_PORT      first slurmd port (default 17001)
#   PLUGIN_SO        if set, plugstack.conf gets "optional $PLUGIN_SO $PLUGIN_ARGS"
#   PLUGIN_ARGS      arguments for that plugstack line
#   PLUGIN_REQUIRED=1  "required" instead of "optional"
#   PRIVATE_HOSTS    1 (default) / 0: see above (default mode only)
#   TASK_PLUGIN      default task/none (task/affinity works too)
#   OVERSUBSCRIBE    the partition's OverSubscribe= (default YES; FORCE:4 lets
#                    every job share CPUs, which test harnesses like)
#   EXTRA_CONF       extra slurm.conf lines (newline-separated), e.g.
#                    "MpiParams=ports=12000-12999"
#   NODE_GRES        Gres= of the NodeName line, e.g. "gpu:4" (fake GPUs;
#                    also add "GresTypes=gpu" to EXTRA_CONF)
#   GRES_CONF        content of LAB_DIR/gres.conf (next to slurm.conf, where
#                    Slurm looks), e.g. "AutoDetect=off\nNodeName=n[1-3]
#                    Name=gpu File=/dev/tty[0-3]" (any character devices)
#   WAIT_S           seconds to wait for all nodes to be idle (default 30)
#   PREEMPT_GRACE    if set (seconds): partition-priority preemption.  The
#                    default partition "debug" (PriorityTier=1) becomes
#                    preemptable, PreemptMode=REQUEUE GraceTime=PREEMPT_GRACE;
#                    a second partition "urgent" on the same nodes
#                    (PriorityTier=2, PreemptMode=OFF) preempts it.  Jobs of
#                    debug among themselves behave as without it (one tier)
#   AUTH             munge (default: a private munged, key and socket in
#                    LAB_DIR) or none (auth/none + cred/none, no munged)
#   NETNS=1          separate "hosts", see above
#   NETNS_NET        /24 prefix for NETNS=1 (default 10.250.0)
#
# On success prints LAB_DIR on stdout and writes $LAB_DIR/env.sh:
#   . "$LAB_DIR/env.sh"; srun -N3 -n6 hostname
# Stop with: minicluster-stop.sh "$LAB_DIR" [--rm]
# On failure it stops whatever it had started (the logs stay in LAB_DIR).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
NODES=${NODES:-3}
CPUS=${CPUS:-4}
CTLD_PORT=${CTLD_PORT:-6817}
SLURMD_PORT=${SLURMD_PORT:-17001}
PRIVATE_HOSTS=${PRIVATE_HOSTS:-1}
NETNS=${NETNS:-0}
AUTH=${AUTH:-munge}
NETNS_NET=${NETNS_NET:-10.250.0}
TASK_PLUGIN=${TASK_PLUGIN:-task/none}
OVERSUBSCRIBE=${OVERSUBSCRIBE:-YES}
WAIT_S=${WAIT_S:-30}

die() { echo "minicluster: $*" >&2; exit 1; }
isnum() { case $1 in ''|*[!0-9]*) return 1;; esac; }

isnum "$NODES" && [ "$NODES" -ge 1 ] && [ "$NODES" -le 9 ] || die "NODES must be 1..9 (got '$NODES')"
isnum "$CPUS" && [ "$CPUS" -ge 1 ] || die "CPUS must be a positive integer (got '$CPUS')"
for v in CTLD_PORT SLURMD_PORT; do
	isnum "${!v}" && [ "${!v}" -ge 1024 ] && [ "${!v}" -le 65000 ] || die "$v must be 1024..65000 (got '${!v}')"
done
case $AUTH in munge|none) ;; *) die "AUTH must be munge or none (got '$AUTH')";; esac
case $NETNS in 0|1) ;; *) die "NETNS must be 0 or 1 (got '$NETNS')";; esac
[[ $NETNS_NET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "NETNS_NET must look like 10.250.0 (got '$NETNS_NET')"
[ "$(id -u)" = 0 ] || die "must run as root (slurmd, munged, namespaces)"
bins="slurmctld slurmd sinfo srun unshare"
[ "$AUTH" = munge ] && bins="$bins munged mungekey"
[ "$NETNS" = 1 ] && bins="$bins ip nsenter"
for b in $bins; do
	command -v "$b" >/dev/null || die "missing $b (apt-get install slurmctld slurmd slurm-client munge iproute2)"
done
if [ -n "${PLUGIN_SO:-}" ]; then
	case $PLUGIN_SO in /*) ;; *) die "PLUGIN_SO must be an absolute path (got '$PLUGIN_SO')";; esac
	[ -f "$PLUGIN_SO" ] || die "PLUGIN_SO=$PLUGIN_SO does not exist"
fi

# --- refuse busy ports (read /proc directly: no dependency on ss) -------------
listening() { # prints every TCP port in LISTEN state in this network namespace
	local f
	for f in /proc/net/tcp /proc/net/tcp6; do
		[ -r "$f" ] || continue
		awk 'NR > 1 && $4 == "0A" { n = split($2, a, ":"); print a[n] }' "$f" |
			while read -r hex; do echo $((16#$hex)); done
	done
}
busy=$(listening | sort -u)
ports="$CTLD_PORT"
[ "$NETNS" = 1 ] || ports="$ports $(seq -s ' ' "$SLURMD_PORT" $((SLURMD_PORT + NODES - 1)))"
for p in $ports; do
	if grep -qx "$p" <<<"$busy"; then
		die "port $p is already in use (another cluster or a system slurmctld/slurmd?): choose free ones with CTLD_PORT=... SLURMD_PORT=..."
	fi
done
if [ "$NETNS" = 1 ] && grep -q " $NETNS_NET\.1/" <<<"$(ip -4 -o addr show 2>/dev/null)"; then
	die "address $NETNS_NET.1 is already configured here (another NETNS cluster?): choose another NETNS_NET=..."
fi

# --- lab directory -------------------------------------------------------------
LAB_DIR=${LAB_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/minicluster.XXXXXX")}
mkdir -p "$LAB_DIR"
LAB_DIR=$(cd "$LAB_DIR" && pwd -P)
case $LAB_DIR/ in /etc/*|/) die "refusing LAB_DIR=$LAB_DIR";; esac
[ -e "$LAB_DIR/pids" ] && die "$LAB_DIR/pids exists: a cluster is running there; stop it first"
chmod 755 "$LAB_DIR"   # munged wants o+x on every directory above its socket
mkdir -p "$LAB_DIR"/{munge,state,log}
chmod 755 "$LAB_DIR/munge"
for i in $(seq 1 "$NODES"); do mkdir -p "$LAB_DIR/spool/n$i"; done

# from here on a failure cleans up what was started
started=0
cleanup_on_error() {
	local rc=$?
	if [ $rc != 0 ] && [ $started = 1 ]; then
		echo "minicluster: start failed (rc=$rc); stopping what was started; logs in $LAB_DIR/log" >&2
		"$HERE/minicluster-stop.sh" "$LAB_DIR" >&2 || true
	fi
}
trap cleanup_on_error EXIT

HOST=$(hostname -s)
NODESPEC="n[1-$NODES]"
PORTSPEC="$SLURMD_PORT-$((SLURMD_PORT + NODES - 1))"
if [ "$NODES" = 1 ]; then NODESPEC=n1; PORTSPEC=$SLURMD_PORT; fi
if [ "$NETNS" = 1 ]; then
	CTLD_ADDR=$NETNS_NET.1
	if [ "$NODES" = 1 ]; then
		NODE_LINE="NodeName=n1 NodeHostname=n1 NodeAddr=${NETNS_NET}.11"
	else
		NODE_LINE="NodeName=${NODESPEC} NodeHostname=${NODESPEC} NodeAddr=${NETNS_NET}.1[1-$NODES]"
	fi
	NODE_LINE="$NODE_LINE Port=${SLURMD_PORT} CPUs=${CPUS} RealMemory=1000 State=UNKNOWN"
else
	CTLD_ADDR=127.0.0.1
	NODE_LINE="NodeName=${NODESPEC} NodeHostname=${HOST} NodeAddr=127.0.0.1 Port=${PORTSPEC} CPUs=${CPUS} RealMemory=1000 State=UNKNOWN"
fi

[ -n "${NODE_GRES:-}" ] && NODE_LINE="$NODE_LINE Gres=${NODE_GRES}"

# partitions, and partition-priority preemption with PREEMPT_GRACE
PART_LINE="PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=${OVERSUBSCRIBE}"
PREEMPT_LINES=
if [ -n "${PREEMPT_GRACE:-}" ]; then
	isnum "$PREEMPT_GRACE" || die "PREEMPT_GRACE must be seconds (got '$PREEMPT_GRACE')"
	# (debug is not PreemptMode=OFF: read in 22.05's cons_common/job_test.c,
	# a job that finds no idle core then loses the cores of every running
	# job of an OFF partition, its own included, and OverSubscribe sharing
	# inside debug would stop)
	PREEMPT_LINES="PreemptType=preempt/partition_prio
PreemptMode=REQUEUE"
	PART_LINE="$PART_LINE PriorityTier=1 PreemptMode=REQUEUE GraceTime=${PREEMPT_GRACE}
PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF"
fi

[ -n "${GRES_CONF:-}" ] && printf '%s\n' "$GRES_CONF" >"$LAB_DIR/gres.conf"

# --- munge -----------------------------------------------------------------------
MUNGE_SOCK=$LAB_DIR/munge/munge.sock
if [ "$AUTH" = munge ]; then
	mungekey -c -f -k "$LAB_DIR/munge/munge.key"
	chmod 600 "$LAB_DIR/munge/munge.key"
	AUTH_LINES="AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${MUNGE_SOCK}"
else
	AUTH_LINES="AuthType=auth/none
CredType=cred/none"
fi

# --- slurm.conf ------------------------------------------------------------------
cat >"$LAB_DIR/slurm.conf" <<EOF
# generated by minicluster.sh
ClusterName=minicluster
SlurmctldHost=${HOST}(${CTLD_ADDR})
SlurmctldPort=${CTLD_PORT}
SlurmUser=root
SlurmdUser=root
${AUTH_LINES}
StateSaveLocation=${LAB_DIR}/state
SlurmdSpoolDir=${LAB_DIR}/spool/%n
SlurmctldPidFile=${LAB_DIR}/slurmctld.pid
SlurmdPidFile=${LAB_DIR}/slurmd-%n.pid
SlurmctldLogFile=${LAB_DIR}/log/slurmctld.log
SlurmdLogFile=${LAB_DIR}/log/slurmd-%n.log
PlugStackConfig=${LAB_DIR}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=${TASK_PLUGIN}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
# start batch jobs at once and rescan pending jobs every second (defaults 3 s
# and 60 s): back-to-back tests otherwise wait for nodes leaving COMPLETING
SchedulerParameters=batch_sched_delay=0,sched_interval=1
JobAcctGatherType=jobacct_gather/none
# keep finished jobs in slurmctld for an hour (default 300 s): run.sh checks
# the batch jobs it submits first only after the other cases, 10 minutes on;
# a purged job reads as JobState "" and its check failed
MinJobAge=3600
# no slurmdbd: plain sacct has nothing ("Slurm accounting storage is
# disabled"); the job completion log gives "sacct -c" one record per job
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=${LAB_DIR}/log/jobcomp.txt
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
${PREEMPT_LINES}
${EXTRA_CONF:-}
${NODE_LINE}
${PART_LINE}
EOF

: >"$LAB_DIR/plugstack.conf"
if [ -n "${PLUGIN_SO:-}" ]; then
	kw=optional; [ "${PLUGIN_REQUIRED:-0}" = 1 ] && kw=required
	echo "$kw $PLUGIN_SO ${PLUGIN_ARGS:-}" >"$LAB_DIR/plugstack.conf"
fi

# the private /etc/hosts view of the daemons (and so of the tasks)
if [ "$NETNS" = 1 ]; then
	{ grep -vw -- "$HOST" /etc/hosts || true; echo "$NETNS_NET.1 $HOST"
	  for i in $(seq 1 "$NODES"); do echo "$NETNS_NET.1$i n$i"; done; } >"$LAB_DIR/hosts"
else
	{ cat /etc/hosts; echo "127.0.0.1 $(seq -f 'n%g' -s ' ' 1 "$NODES")"; } >"$LAB_DIR/hosts"
fi

cat >"$LAB_DIR/env.sh" <<EOF
export SLURM_CONF=${LAB_DIR}/slurm.conf
export MINICLUSTER_DIR=${LAB_DIR}
EOF

# --- daemons ---------------------------------------------------------------------
# launch.sh runs in a private mount namespace (PRIVATE_HOSTS=1); the daemons
# it starts stay in that namespace after it exits.
cat >"$LAB_DIR/launch.sh" <<EOF
#!/bin/sh
set -e
if [ "\${1:-}" = ns ]; then mount --bind "$LAB_DIR/hosts" /etc/hosts; fi
export SLURM_CONF="$LAB_DIR/slurm.conf"
if [ "$AUTH" = munge ]; then
munged --key-file="$LAB_DIR/munge/munge.key" --socket="$MUNGE_SOCK" \\
  --pid-file="$LAB_DIR/munge/munged.pid" --log-file="$LAB_DIR/log/munged.log" \\
  --seed-file="$LAB_DIR/munge/munged.seed"
fi
slurmctld -c -i
if [ "$NETNS" != 1 ]; then for i in \$(seq 1 $NODES); do slurmd -N n\$i; done; fi
EOF
chmod +x "$LAB_DIR/launch.sh"

started=1
if [ "$NETNS" = 1 ]; then
	# short unique tag for interface and namespace names (IFNAMSIZ is 16)
	TAG=$(basename "$LAB_DIR" | md5sum | cut -c1-6)
	BR=mcbr$TAG
	ip link show "$BR" >/dev/null 2>&1 && die "bridge $BR already exists"
	echo "bridge $BR" >"$LAB_DIR/netns"
	ip link add "$BR" type bridge
	ip addr add "$NETNS_NET.1/24" dev "$BR"
	ip link set "$BR" up
	for i in $(seq 1 "$NODES"); do
		ns=mc$TAG-n$i
		ip netns add "$ns"; echo "netns $ns" >>"$LAB_DIR/netns"
		ip link add "mc$TAG-$i" type veth peer name eth0 netns "$ns"
		ip link set "mc$TAG-$i" master "$BR" up
		ip -n "$ns" addr add "$NETNS_NET.1$i/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$ns" link set lo up
	done
	# munged + slurmctld in the root namespaces (launch.sh skips slurmd here)
	"$LAB_DIR/launch.sh"
	for i in $(seq 1 "$NODES"); do
		# nsenter, not "ip netns exec": that remounts /sys, hiding
		# /sys/fs/cgroup, and slurmd 22.05 then dies in its cgroup init
		nsenter --net="/run/netns/mc$TAG-n$i" \
			unshare --uts --mount --propagation private -- sh -c \
			"hostname n$i && mount --bind '$LAB_DIR/hosts' /etc/hosts && SLURM_CONF='$LAB_DIR/slurm.conf' exec slurmd -N n$i"
	done
elif [ "$PRIVATE_HOSTS" = 1 ]; then
	unshare --mount --propagation private -- "$LAB_DIR/launch.sh" ns
else
	"$LAB_DIR/launch.sh"
fi

# collect pids (the daemons write their pid files after forking)
pidfiles=("$LAB_DIR/slurmctld.pid")
[ "$AUTH" = munge ] && pidfiles=("$LAB_DIR/munge/munged.pid" "${pidfiles[@]}")
for i in $(seq 1 "$NODES"); do pidfiles+=("$LAB_DIR/slurmd-n$i.pid"); done
for _ in $(seq 1 100); do
	ok=1; for f in "${pidfiles[@]}"; do [ -s "$f" ] || ok=0; done
	[ $ok = 1 ] && break; sleep 0.1
done
: >"$LAB_DIR/pids.tmp"
missing=
for f in "${pidfiles[@]}"; do
	if [ -s "$f" ]; then echo "$(cat "$f") $(basename "$f" .pid)" >>"$LAB_DIR/pids.tmp"
	else missing="$missing $f"; fi
done
mv "$LAB_DIR/pids.tmp" "$LAB_DIR/pids"
[ -z "$missing" ] || die "no pid file:$missing (a daemon failed to start; see $LAB_DIR/log)"

# wait until every node is idle
export SLURM_CONF=$LAB_DIR/slurm.conf
deadline=$((SECONDS + WAIT_S))
# (one line per node and partition: count the distinct idle nodes)
until [ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" = "$NODES" ]; do
	if [ $SECONDS -ge $deadline ]; then
		sinfo >&2 || true
		die "nodes not idle after ${WAIT_S}s (logs in $LAB_DIR/log)"
	fi
	sleep 0.2
done
started=0
echo "$LAB_DIR"
