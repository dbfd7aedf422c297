#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# cluster.sh - try dpg yourself: start a local 3-node Slurm minicluster with
# the plugin in plugstack.conf and leave it up; stop it when you are done.
#   scripts/cluster.sh start   build dpg (build/demo) if needed, start the
#                              cluster in $DPG_LAB, print what to source
#   scripts/cluster.sh stop    stop it and remove $DPG_LAB
#   scripts/cluster.sh status  say whether it is up
# Env: DPG_LAB (default /tmp/dpg-lab), NODES (default 3).  Root, Debian 12
# (scripts/deps.sh installs Slurm, munge and the build tools).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
lab=${DPG_LAB:-/tmp/dpg-lab}
build=$top/build/demo

say() { echo "cluster: $*" >&2; }
build_dpg() {
	[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi) >"$top/build/autoreconf.log" 2>&1 ||
		{ cat "$top/build/autoreconf.log" >&2; exit 1; }
	mkdir -p "$build"
	if ! (cd "$build" && { [ -f Makefile ] || ../../configure -q; } && make -s -j2 &&
	      make -s -j2 examples/train examples/allreduce_demo) >"$build/build.log" 2>&1; then
		tail -n 30 "$build/build.log" >&2
		say "the build failed (log: $build/build.log)"
		exit 1
	fi
}

case ${1:-} in
start)
	if [ -f "$lab/env.sh" ] && [ -f "$lab/pids" ]; then
		say "already up in $lab: . $lab/env.sh"
		exit 0
	fi
	mkdir -p "$top/build"
	say "building dpg in build/demo (log: build/demo/build.log)"
	build_dpg
	say "starting ${NODES:-3} nodes n1..n${NODES:-3} with $build/.libs/dpg.so in plugstack.conf"
	rm -rf "$lab"
	LAB_DIR=$lab NODES=${NODES:-3} PLUGIN_SO=$build/.libs/dpg.so \
		"$top/tests/e2e/minicluster.sh" >"$top/build/cluster-start.log" 2>&1 ||
		{ cat "$top/build/cluster-start.log" >&2; say "the cluster did not start"; exit 1; }
	say "up. In your shell:  . $lab/env.sh   then e.g.  srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 --dpg-verbose build/demo/examples/train"
	say "stop it with:       $([ "$lab" = /tmp/dpg-lab ] || echo "DPG_LAB=$lab ")scripts/cluster.sh stop"
	;;
stop)
	[ -d "$lab" ] || { say "nothing to stop in $lab"; exit 0; }
	"$top/tests/e2e/minicluster-stop.sh" "$lab" --rm >/dev/null
	say "stopped; $lab removed"
	;;
status)
	if [ -f "$lab/env.sh" ]; then
		# shellcheck disable=SC1091
		. "$lab/env.sh" && sinfo -h -o '%D nodes %N: %T' && say "up: . $lab/env.sh"
	else
		say "not running"; exit 1
	fi
	;;
*)
	sed -n '3,11p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
