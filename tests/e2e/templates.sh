#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# templates.sh - submit the etc/sbatch/ templates to a real 3-node Slurm
# minicluster with dpg.so in plugstack.conf and check what they print.
#
#   PLUGIN_SO=/abs/build/.libs/dpg.so [DPG_DEMO=/abs/build/examples/allreduce_demo] \
#       DPG_PYENV=$(scripts/pyenv.sh) tests/e2e/templates.sh
#
# Each template keeps its "#SBATCH --dpg-gpus-per-task=1" and is submitted as
#   sbatch --dpg-gpus-per-task=0 -N2 --ntasks-per-node=2 TEMPLATE
# (the command line overrides #SBATCH) with PYTHON=$PY; the job state is
# polled (no sbatch --wait).  Prints "ok NAME (x.xs)" / "FAIL NAME" + output /
# "SKIP NAME  # why", then "N passed, M failed".  Needs root and
# slurmctld slurmd slurm-client munge python3-torch (apt).  Knobs: CTLD_PORT,
# SLURMD_PORT (default: free ones), E2E_KEEP=1 (keep the outputs).
set -uo pipefail

E2E_DIR=$(cd "$(dirname "$0")" && pwd)
. "$E2E_DIR/lib.sh"
SRCDIR=$(cd "$E2E_DIR/../.." && pwd)
PY=${DPG_PYENV:-${PY:-/usr/bin/python3}}   # scripts/pyenv.sh's python
# a venv's directory is taken for its python, as run.sh does
py_arg=$PY
PY=$(e2e_python "$PY") || {
	echo "templates.sh: ${DPG_PYENV:+DPG_PYENV=}$py_arg is not a python (give the program, e.g. \$(scripts/pyenv.sh --print))" >&2
	exit 2
}
PLUGIN_SO=${PLUGIN_SO:-}
DEMO=${DPG_DEMO:-}
T0=$(e2e_now)

die() { echo "templates.sh: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "must run as root (it starts slurmctld, slurmd and munged)"
for b in sbatch scontrol scancel slurmctld slurmd; do
	command -v $b >/dev/null || die "missing $b: apt-get install slurmctld slurmd slurm-client munge"
done
[ -n "$PLUGIN_SO" ] && [ -f "$PLUGIN_SO" ] || die "set PLUGIN_SO to the built dpg.so"
PLUGIN_SO=$(cd "$(dirname "$PLUGIN_SO")" && pwd)/$(basename "$PLUGIN_SO")
[ -n "$DEMO" ] || DEMO=$(dirname "$PLUGIN_SO")/../examples/allreduce_demo
if [ -x "$DEMO" ]; then
	DEMO=$(cd "$(dirname "$DEMO")" && pwd)/$(basename "$DEMO")
else
	DEMO=
fi
[ -x "$PY" ] || die "no python at PY=$PY"

# nothing from the caller's environment may leak into the jobs (but keep the
# caller's SLURMD_PORT, a knob of ours that the SLURMD_* pattern would drop)
KEEP_SLURMD_PORT=${SLURMD_PORT:-}
for v in $(compgen -v); do
	case $v in
	SLURM_*|SLURMD_*|SPANK_*|_SLURM_*|DPG_*|TORCHELASTIC_*) unset "$v";;
	RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|NODE_RANK|GROUP_RANK|GROUP_WORLD_SIZE|\
	ROLE_RANK|ROLE_WORLD_SIZE|ROLE_NAME|MASTER_ADDR|MASTER_PORT|PYTHON|TRAIN) unset "$v";;
	esac
done
[ -z "$KEEP_SLURMD_PORT" ] || SLURMD_PORT=$KEEP_SLURMD_PORT

e2e_pick_ports
LAB=$(mktemp -d "${TMPDIR:-/tmp}/dpg-tpl.XXXXXX")
chmod 755 "$LAB"
WORK=$LAB/work
mkdir -p "$WORK/log"
chmod 777 "$WORK"
STOPPED=0
stop_cluster() {
	[ $STOPPED = 0 ] || return 0
	STOPPED=1
	if [ -f "$LAB/slurm.conf" ]; then
		"$E2E_DIR/minicluster-stop.sh" "$LAB" >/dev/null 2>"$LAB/stop.err" ||
			cat "$LAB/stop.err" >&2
	fi
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_cluster
	if [ "${E2E_KEEP:-0}" = 1 ]; then echo "# kept $LAB" >&2; else rm -rf "$LAB"; fi
	exit $rc
}
trap cleanup EXIT
trap 'echo "templates.sh: interrupted" >&2; exit 130' INT TERM

echo "# dpg sbatch templates: 3-node minicluster, ports $CTLD_PORT/$SLURMD_PORT, plugin $PLUGIN_SO"
if ! LAB_DIR=$LAB NODES=3 CPUS=4 OVERSUBSCRIBE=FORCE:4 PLUGIN_SO=$PLUGIN_SO PLUGIN_ARGS='' \
	"$E2E_DIR/minicluster.sh" >"$WORK/start.out" 2>&1; then
	cat "$WORK/start.out" >&2
	die "the minicluster did not start (logs in $LAB)"
fi
. "$LAB/env.sh"
echo "# cluster up in $(e2e_elapsed "$T0")s"

# submit TEMPLATE [ARGS]: sbatch it the way the templates' headers say, wait
# for it, leave its output (stdout + stderr) in $OUT; fail unless COMPLETED.
submit() {
	local tpl=$SRCDIR/etc/sbatch/$1 j
	shift
	OUT=$WORK/$(basename "$tpl" .sbatch).out
	echo "\$ PYTHON=$PY sbatch --dpg-gpus-per-task=0 -N2 --ntasks-per-node=2 etc/sbatch/$(basename "$tpl") $*"
	j=$(PYTHON=$PY DPG_TIMEOUT=30 sbatch --parsable --dpg-gpus-per-task=0 -N2 --ntasks-per-node=2 \
		--chdir="$SRCDIR" -o "$OUT" -t 5 "$tpl" "$@" 2>&1) || fail "sbatch: $j" || return 1
	job_wait "$j" 280; local rc=$?
	show "$OUT" "job $j output"
	return $rc
}

# check_sync N: N ranks of a world of N on 2 nodes said "weights in sync: True"
check_sync() {
	local n=$1 got nodes
	got=$(grep -c "^rank [0-9]*/$n .*weights in sync: True$" "$OUT")
	[ "$got" = "$n" ] || fail "want $n 'rank r/$n ... weights in sync: True' lines, got $got" || return 1
	nodes=$(grep -o "^rank [0-9]*/$n .*on n[0-9]*" "$OUT" | awk '{print $NF}' | sort -u | wc -l)
	[ "$nodes" = 2 ] || fail "the ranks ran on $nodes nodes, want 2 (-N2 must beat #SBATCH)"
}

t_ddp() {
	submit torch-ddp.sbatch || return 1
	grep -q '^step  40  mean loss [0-9.]*$' "$OUT" || fail "no 'step 40 mean loss' line" || return 1
	check_sync 4 || return 1
	note "$(grep '^step  40' "$OUT")"
}

t_fsdp() {
	submit torch-fsdp.sbatch || return 1
	grep -q '^mode fsdp2 (fully_shard) on cpu, world size 4$' "$OUT" || fail "no 'mode fsdp2 ... world size 4' line" || return 1
	grep -q '^step 40 loss [0-9.]*$' "$OUT" || fail "no 'step 40 loss' line" || return 1
	[ "$(grep -c '^rank [0-3]/4: holds [0-9]* of [0-9]* parameter elements$' "$OUT")" = 4 ] ||
		fail "want 4 'rank r/4: holds ...' lines" || return 1
	note "$(grep '^step 40' "$OUT"); $(grep -m1 'holds' "$OUT")"
}

t_lightning() {
	submit lightning.sbatch || return 1
	check_sync 4
}

t_accelerate() {
	submit accelerate.sbatch || return 1
	[ "$(grep -c '^process [0-3]/4 (DistributedType.MULTI_CPU, .*weights in sync: True$' "$OUT")" = 4 ] ||
		fail "want 4 'process i/4 (MULTI_CPU ...) weights in sync: True' lines" || return 1
	note "$(grep -m1 '^process 0/4' "$OUT" | sed 's/.*: loss/loss/')"
}

t_jax() {
	submit jax.sbatch || return 1
	[ "$(grep -c '^process [0-3]/4 on .* sum 10 loss .* weights agree: True$' "$OUT")" = 4 ] ||
		fail "want 4 'process i/4 ... sum 10 ... weights agree: True' lines" || return 1
	note "$(grep -m1 '^jax ' "$OUT")"
}

t_c() {
	submit c-libdpg.sbatch "$DEMO" || return 1
	grep -q '^dpg [0-9.]*: 4 ranks, sum of rank+1 = 10 (expected 10)$' "$OUT" ||
		fail "rank 0 did not print 'sum of rank+1 = 10 (expected 10)'" || return 1
	[ "$(grep -c '^  {"rank": ' "$OUT")" = 4 ] || fail "want 4 all_gather lines" || return 1
	note "$(grep '^dpg ' "$OUT")"
}

# the save-then-requeue template, not warned: one run from scratch, done
t_c_requeue() {
	local rc
	export CKPT=$WORK/requeue-ck
	submit c-libdpg-requeue.sbatch "$(dirname "$DEMO")/train" --steps 20 --deterministic; rc=$?
	unset CKPT
	[ $rc = 0 ] || return 1
	grep -q '^run 1 of job [0-9]*: from scratch$' "$OUT" || fail "no 'run 1 of job J: from scratch' line" || return 1
	grep -q '^done: steps 20 .* world 4 ' "$OUT" || fail "no 'done: steps 20 ... world 4' line" || return 1
	note "$(grep '^run 1' "$OUT"); $(grep '^done:' "$OUT")"
}

# the PyTorch save-then-requeue template, not warned: one run, done, nothing
# saved (tests/e2e/requeue.sh warns it and checks the save and the requeue)
t_torch_requeue() {
	local rc
	export CKPT=$WORK/torch-requeue-ck
	submit torch-requeue.sbatch --steps 300; rc=$?
	unset CKPT
	[ $rc = 0 ] || return 1
	grep -q '^run 1 of job [0-9]*: from scratch$' "$OUT" || fail "no 'run 1 of job J: from scratch' line" || return 1
	grep -q '^done: steps 300 params sha256 [0-9a-f]\{64\}$' "$OUT" || fail "no 'done: steps 300 params sha256 ...' line" || return 1
	! grep -q '^requeueing' "$OUT" || fail "requeued although not warned" || return 1
	[ ! -e "$WORK/torch-requeue-ck/latest" ] || fail "saved although not warned" || return 1
	note "$(grep '^run 1' "$OUT"); $(grep '^done:' "$OUT" | cut -c1-60)..."
}

skip() { skip_case "$1" "$2"; }

need_py() { # MODULE: the template's client is importable by $PY
	"$PY" -c "import $1" 2>/dev/null && return 0
	skip "$2" "$1 is not importable by $PY (set DPG_PYENV=\$(scripts/pyenv.sh))"
	return 1
}
need_py torch.distributed.fsdp torch-ddp.sbatch &&
	run_case "torch-ddp.sbatch: DDP (gloo) 2x2 ranks, loss printed, weights in sync" t_ddp
need_py torch.distributed.fsdp torch-fsdp.sbatch &&
	run_case "torch-fsdp.sbatch: FSDP2 (fully_shard) 2x2 ranks, 1/4 of the parameters each" t_fsdp
need_py torch.distributed.checkpoint torch-requeue.sbatch &&
	run_case "torch-requeue.sbatch: torch_requeue.py 2x2 ranks, not warned: one run, done" t_torch_requeue
need_py lightning.pytorch lightning.sbatch &&
	run_case "lightning.sbatch: Lightning DDP 2x2 ranks, weights in sync" t_lightning
need_py accelerate accelerate.sbatch &&
	run_case "accelerate.sbatch: Accelerator() 2x2 processes, weights in sync" t_accelerate
need_py jax jax.sbatch &&
	run_case "jax.sbatch: jax.distributed.initialize() 2x2 processes, sum 10" t_jax
if [ -n "$DEMO" ]; then
	run_case "c-libdpg.sbatch: allreduce_demo 2x2 ranks, sum 10" t_c
	run_case "c-libdpg-requeue.sbatch: train 2x2 ranks, not warned: one run, done" t_c_requeue
else
	skip c-libdpg.sbatch "no allreduce_demo (set DPG_DEMO or build examples/ next to PLUGIN_SO)"
fi

stop_cluster
echo "$E2E_PASS passed, $E2E_FAIL failed, $E2E_SKIP skipped ($(e2e_elapsed "$T0")s)"
[ $E2E_FAIL = 0 ]
