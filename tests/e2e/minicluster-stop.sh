#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# minicluster-stop.sh LAB_DIR [--rm] - stop a cluster started by minicluster.sh.
#
# Cancels its jobs, then stops exactly the daemons whose PIDs minicluster.sh
# saved (slurmd first, munged last; TERM, then KILL after 10 s).  A PID is only
# signalled while /proc/PID/comm still names the daemon we started, so a
# reused PID is never hit.  Works on a half-started cluster too (no "pids"
# file yet: the daemons' own pid files are used).  In NETNS=1 mode it then
# deletes its own namespaces and bridge.  --rm deletes LAB_DIR afterwards.
# Never touches anything outside LAB_DIR except its own namespaces/bridge.
set -uo pipefail
LAB_DIR=${1:-${MINICLUSTER_DIR:-}}
[ -n "$LAB_DIR" ] && [ -d "$LAB_DIR" ] && [ -f "$LAB_DIR/slurm.conf" -o -f "$LAB_DIR/netns" ] ||
	{ echo "usage: $0 LAB_DIR [--rm]  (LAB_DIR=$LAB_DIR is not a minicluster directory)" >&2; exit 1; }
export SLURM_CONF=$LAB_DIR/slurm.conf

pidlist() { # "PID NAME" for every daemon we may have started
	if [ -f "$LAB_DIR/pids" ]; then cat "$LAB_DIR/pids"; return; fi
	local f
	for f in "$LAB_DIR"/slurmd-n*.pid "$LAB_DIR/slurmctld.pid" "$LAB_DIR/munge/munged.pid"; do
		[ -s "$f" ] && echo "$(cat "$f") $(basename "$f" .pid)"
	done
}
is_ours() { # pid still runs the program we started (guards against pid reuse)
	local comm
	case $1 in ''|*[!0-9]*) return 1;; esac
	comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 1
	case "$2" in
	munged) [ "$comm" = munged ];;
	slurmctld) [ "$comm" = slurmctld ];;
	slurmd-*) [ "$comm" = slurmd ];;
	*) return 1;;
	esac
}
all=$(pidlist)
order=$(grep ' slurmd-' <<<"$all"; grep ' slurmctld$' <<<"$all"; grep ' munged$' <<<"$all")

# 1) cancel whatever is still queued or running and let the steps end
ctld_alive=0
while read -r pid name; do [ "$name" = slurmctld ] && is_ours "$pid" "$name" && ctld_alive=1; done <<<"$order"
if [ $ctld_alive = 1 ] && timeout 10 scancel --quiet --full --user=root 2>/dev/null; then
	for _ in $(seq 1 50); do
		[ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2
	done
fi

# 2) stop the daemons, slurmd first, munged last
while read -r pid name; do
	[ -n "$pid" ] || continue
	is_ours "$pid" "$name" && kill -TERM "$pid"
done <<<"$order"
for _ in $(seq 1 50); do
	left=0
	while read -r pid name; do is_ours "$pid" "$name" && left=1; done <<<"$order"
	[ $left = 0 ] && break; sleep 0.2
done
while read -r pid name; do
	if is_ours "$pid" "$name"; then
		echo "minicluster-stop: $name ($pid) ignored TERM, killing" >&2; kill -KILL "$pid"
	fi
done <<<"$order"
rm -f "$LAB_DIR/pids"

# 3) NETNS=1: our namespaces (anything still running in one of OUR namespaces
#    was started by this cluster's jobs) and our bridge
if [ -f "$LAB_DIR/netns" ]; then
	while read -r kind name; do
		[ "$kind" = netns ] || continue
		for p in $(ip netns pids "$name" 2>/dev/null); do
			echo "minicluster-stop: killing leftover pid $p in $name" >&2; kill -KILL "$p"
		done
		# delete our end of the veth pair first (synchronous; the peer
		# inside the namespace goes with it), then the namespace
		ip link del "${name%-n*}-${name##*-n}" 2>/dev/null
		ip netns del "$name" 2>/dev/null
	done <"$LAB_DIR/netns"
	br=$(awk '$1=="bridge"{print $2}' "$LAB_DIR/netns")
	[ -n "$br" ] && ip link del "$br" 2>/dev/null
	rm -f "$LAB_DIR/netns"
fi
[ "${2:-}" = --rm ] && rm -rf "$LAB_DIR"
exit 0
