#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# coll_bench.sh - libdpg's CPU collectives side by side with Open MPI and with
# Gloo (PyTorch's ProcessGroupGloo) on this machine: allreduce, reduce_scatter,
# allgather and bcast bus bandwidth (nccl-tests formulas) for 4 KiB .. 64 MiB,
# over shared memory and over TCP loopback, for each rank count; the runs are
# interleaved (dpg, Open MPI, Gloo per configuration and op, in a shuffled
# order, RUNS times) and the table
# reports the median over runs of each run's median, with dpg/peer ratios and
# the worst cell's ratio as the headline.  Gloo has no shared-memory transport:
# its "shm" column is what a one-node PyTorch job gets (loopback TCP).
#
# Usage: bench/coll_bench.sh [--smoke] [OUTDIR]
#   --smoke (or SMOKE=1): 2 ranks, allreduce and allgather, 4..64 KiB, one run,
#   short batches
# Environment:
#   BUILD=DIR              the build tree with bench/coll_bench (and
#                          bench/coll_mpi where configure found mpicc):
#                          `make -C DIR bench-programs`; default build/werror
#                          or build/dev (bench/lib.sh)
#   RANKS="2 4"            rank counts
#   TRANSPORTS="shm tcp"   shm: dpg shared memory vs Open MPI vader;
#                          tcp: dpg TCP ring vs Open MPI btl tcp (both on lo)
#   RUNS=3                 interleaved repetitions
#   OPS=allreduce,reduce_scatter,allgather,bcast
#   MINB=4096 MAXB=67108864 FACTOR=4 REPS=7 TARGET_MS=50
#   WAIT_MS=100            late peer: each op at MINB once more with the last
#                          rank (broadcast: the root) WAIT_MS late; the
#                          table's "CPU time while waiting" says what the
#                          others burn (0: off)
#   LIMIT=1                with shm, also `coll_bench -m limit` (a meeting of
#                          the ranks and the least copying each op needs, on
#                          every rank's own memory at once): the "one-node
#                          reference" table; for allgather and bcast also
#                          `-m cmalimit` (each rank reads what it lacks from
#                          the owners' private buffers with process_vm_readv,
#                          the one kernel copy between processes): its
#                          kernel-copy column;
#                          for allreduce up to 1 MiB also `-m
#                          xferlimit` (each rank copies its input into a
#                          shared slot, they meet, each reduces every slot:
#                          the data crossing between the CPUs, nothing
#                          else): the "cross-CPU reference" table; with tcp, `coll_bench -m
#                          tcplimit` with -Y spin and -Y block (the bytes a
#                          ring moves per rank, over loopback TCP with
#                          nothing else), bare and with -F (in a ring's
#                          order), the better wait of each per cell: the
#                          "TCP reference" table; every cell below a peer
#                          is listed with its references
#   RECHECK=8              after the table's runs, each cell below a peer
#   RECHECK_MAX=12         (the worst RECHECK_MAX) once more alone: that
#                          size only, dpg and that peer interleaved RECHECK
#                          times in a shuffled order (no late peer); the
#                          table's "cells below a peer, alone", by the
#                          rounds' medians and round by round (0: off;
#                          smoke: 1 round of at most 2 cells)
#   MPIRUN=mpirun.openmpi
#   PEERS="ompi gloo"      which peers to run when present
#   GLOO_PY=PYTHON         a python with torch (default: $DPG_PYENV, else the
#                          cached test environment from scripts/pyenv.sh --print)
#   RENDER=1               measure nothing: the table again from the files
#                          of an earlier run in OUTDIR
# Needs python3; the peer needs Open MPI (apt-get install openmpi-bin
# libopenmpi-dev, then re-run configure): without it dpg runs alone and a
# "skip: peer Open MPI ..." line says why.  Runs Open MPI as root with
# --allow-run-as-root.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
bench_top=$(cd "$here/.." && pwd)
bench_name=coll_bench.sh
. "$here/lib.sh"
SMOKE=${SMOKE:-0}
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
if [ "$SMOKE" = 1 ]; then
	RANKS=${RANKS:-2}; RUNS=${RUNS:-1}; OPS=${OPS:-allreduce,allgather}
	MINB=${MINB:-4096}; MAXB=${MAXB:-65536}; REPS=${REPS:-2}; TARGET_MS=${TARGET_MS:-5}
	WAIT_MS=${WAIT_MS:-10}; RECHECK=${RECHECK:-1}; RECHECK_MAX=${RECHECK_MAX:-2}
fi
if [ -n "${1:-}" ]; then
	out=$1
elif [ "$SMOKE" = 1 ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/coll_bench.smoke.XXXXXX")
	trap 'rm -rf "$out"' EXIT
else
	out=/tmp/coll_bench.$(date +%Y%m%d-%H%M%S)
fi
RANKS=${RANKS:-"2 4"}
TRANSPORTS=${TRANSPORTS:-"shm tcp"}
RUNS=${RUNS:-3}
OPS=${OPS:-allreduce,reduce_scatter,allgather,bcast}
MINB=${MINB:-4096}
MAXB=${MAXB:-67108864}
FACTOR=${FACTOR:-4}
REPS=${REPS:-7}
TARGET_MS=${TARGET_MS:-50}
WAIT_MS=${WAIT_MS:-100}
MPIRUN=${MPIRUN:-mpirun.openmpi}
LIMIT=${LIMIT:-1}
RECHECK=${RECHECK:-8}
RECHECK_MAX=${RECHECK_MAX:-12}
RENDER=${RENDER:-0}
# every run into OUTDIR (its files: one per implementation, configuration,
# op and run), then the table from them
measure() {
bench_build
bench_need dpg_prog coll_bench

mkdir -p "$out"
echo "# output in $out"
bench_host | tee "$out/host.txt"

have_mpi=1
if [ ! -x "$BUILD/bench/coll_mpi" ]; then
	have_mpi=0
	bench_skip "peer Open MPI" "not installed ($BUILD/bench/coll_mpi not built: configure found no mpicc; apt-get install openmpi-bin libopenmpi-dev, re-run configure)" |
		tee -a "$out/host.txt"
elif ! command -v "$MPIRUN" >/dev/null 2>&1; then
	have_mpi=0
	bench_skip "peer Open MPI" "not installed ($MPIRUN not on PATH)" | tee -a "$out/host.txt"
fi

PEERS=${PEERS:-"ompi gloo"}
case " $PEERS " in *" ompi "*) ;; *) have_mpi=0 ;; esac
have_gloo=0
case " $PEERS " in
*" gloo "*)
	GLOO_PY=${GLOO_PY:-${DPG_PYENV:-$("$bench_top/scripts/pyenv.sh" --print 2>/dev/null || true)}}
	if [ -z "$GLOO_PY" ]; then
		bench_skip "peer Gloo" "no python with torch (scripts/pyenv.sh builds the test environment; or set GLOO_PY)" | tee -a "$out/host.txt"
	elif ! "$GLOO_PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' >/dev/null 2>&1; then
		bench_skip "peer Gloo" "$GLOO_PY has no torch with gloo" | tee -a "$out/host.txt"
	else
		have_gloo=1
	fi ;;
esac

ARGS="-b $MINB -e $MAXB -f $FACTOR -r $REPS -t $TARGET_MS -W $WAIT_MS"
OMPI="$MPIRUN --allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo"

{
	bench_host
	[ $have_mpi = 0 ] || $MPIRUN --version 2>/dev/null | head -1 || true
	[ $have_gloo = 0 ] || "$GLOO_PY" -c 'import torch; print("torch", torch.__version__, "gloo")' 2>/dev/null || true
} > "$out/env.txt"

# one implementation, one configuration, one op: its lines into its own file
# (into $dest, default $out, with $tag in the name, and $ARGS)
run_one() {	# impl t n op
	f="${dest:-$out}/$1-$2-n$3-$4${tag:-}.run$run.txt"
	echo "# run $run: $1 $2 n=$3 $4 (load $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "# load before: $(cat /proc/loadavg)" > "$f"
	rc=0
	case $1 in
	dpg)	"$dpg_prog" -n "$3" -m "$2" -l "dpg-$2" $ARGS -c "$4" >> "$f" || rc=$? ;;
	limit)	if [ "$2" = shm ]; then
			"$dpg_prog" -n "$3" -m limit -l "limit-$2" $ARGS -c "$4" >> "$f" || rc=$?
			case $4 in allgather|bcast)
				"$dpg_prog" -n "$3" -m cmalimit -l "limitcma-$2" $ARGS -c "$4" >> "$f" ||
					rc=$? ;;
			allreduce)	# the small sizes' cross-CPU one (to 1 MiB)
				xe=$(awk -v a="$ARGS" 'BEGIN { n = split(a, w, " ")
					for (i = 1; i < n; i++) if (w[i] == "-e") e = w[i + 1]
					print (e > 1048576 ? 1048576 : e) }')
				xb=$(awk -v a="$ARGS" 'BEGIN { n = split(a, w, " ")
					for (i = 1; i < n; i++) if (w[i] == "-b") b = w[i + 1]
					print b }')
				if [ "$xb" -le "$xe" ]; then
					"$dpg_prog" -n "$3" -m xferlimit -l "limitxfer-$2" $ARGS -e "$xe" \
						-W 0 -c "$4" >> "$f" || rc=$?
				fi ;;
			esac
		else	# both waits, bare and in a ring's order (the table takes the
			# better wait of each)
			for y in spin block; do
				"$dpg_prog" -n "$3" -m tcplimit -Y $y -l "limit$y-$2" $ARGS -c "$4" >> "$f" ||
					rc=$?
				"$dpg_prog" -n "$3" -m tcplimit -Y $y -F -l "limitring$y-$2" $ARGS -c "$4" \
					>> "$f" || rc=$?
			done
		fi ;;
	gloo)	"$GLOO_PY" "$here/coll_gloo.py" -n "$3" -l "gloo-$2" $ARGS -c "$4" >> "$f" || rc=$? ;;
	ompi)	if [ "$2" = shm ]; then
			btl="--mca btl self,vader"
		else
			btl="--mca btl self,tcp --mca btl_tcp_if_include lo"
		fi
		# shellcheck disable=SC2086
		$OMPI $btl -np "$3" "$BUILD/bench/coll_mpi" -l "ompi-$2" $ARGS -c "$4" >> "$f" || rc=$? ;;
	esac
	echo "# load after: $(cat /proc/loadavg)" >> "$f"
	# one failed invocation costs its cells, not the run
	[ "$rc" = 0 ] || echo "run $run: $1 $2 n=$3 $4 failed (exit $rc): its cells are missing" |
		tee -a "$out/failed.txt" >&2
}

# Interleaved op by op, the implementations in a shuffled order each time:
# this VM's speed changes within minutes (a "slow mode" where one vCPU's
# writes to lines the other has read run several times slower), and no
# implementation should always meet it first or last.
impls="dpg"
[ $have_gloo = 0 ] || impls="$impls gloo"
[ $have_mpi = 0 ] || impls="$impls ompi"
run=1
while [ "$run" -le "$RUNS" ]; do
	for n in $RANKS; do
		for t in $TRANSPORTS; do
			for op in $(echo "$OPS" | tr ',' ' '); do
				these=$impls
				[ "$LIMIT" != 1 ] || these="$these limit"
				for i in $(printf '%s\n' $these | shuf); do
					run_one "$i" "$t" "$n" "$op"
				done
			done
		done
	done
	run=$((run + 1))
done
recheck
}

# Each cell below a peer (the worst RECHECK_MAX) once more, alone: that
# size only, dpg and the peer interleaved RECHECK times.  In the table a
# cell shares its run with dozens of others while the VM drifts; alone and
# paired round by round, a gap that is real shows again.
recheck() {
	[ "$RECHECK" -gt 0 ] || return 0
	python3 "$here/coll_table.py" --below "$out" | head -n "$RECHECK_MAX" > "$out/below.txt"
	[ -s "$out/below.txt" ] || return 0
	echo "# re-measuring $(wc -l < "$out/below.txt") cell(s) below a peer alone, $RECHECK round(s)"
	dest=$out/recheck
	mkdir -p "$dest"
	run=1
	while [ "$run" -le "$RECHECK" ]; do
		while read -r p t n op b; do
			tag=-$b ARGS="-b $b -e $b -f 2 -r $REPS -t $TARGET_MS -W 0"
			for i in $(printf '%s\n' dpg "$p" | shuf); do
				run_one "$i" "$t" "$n" "$op" < /dev/null	# mpirun reads stdin
			done
		done < "$out/below.txt"
		run=$((run + 1))
	done
	dest= tag= ARGS=
}

if [ "$RENDER" = 1 ]; then
	if [ ! -f "$out/host.txt" ]; then
		echo "coll_bench.sh: RENDER=1 needs the OUTDIR of an earlier run ($out has no host.txt)" >&2
		exit 2
	fi
else
	measure
fi

python3 "$here/coll_table.py" "$out"
