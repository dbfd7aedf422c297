# SPDX-License-Identifier: BSD-3-Clause
# shrink.sh - the e2e case of a job that outlives a node: etc/sbatch/shrink.sbatch
# runs examples/train on 3 nodes, n3 is taken away mid-run (its slurmd, step
# daemons and tasks SIGKILLed, the node set DOWN), and the job must go on at
# 4 ranks from the last checkpoint and finish with the very parameters of an
# uninterrupted 6-rank run (--deterministic).  Sourced by run.sh; runs last
# (it releases the allocation and leaves n3 down).

# kill_node NODE: SIGKILL NODE's slurmd, the slurmstepds of its tasks and the
# tasks (found by SLURMD_NODENAME and this cluster's SLURM_CONF), mark it DOWN
kill_node() {
	local node=$1 d e pp tasks=() steps=()
	for d in /proc/[0-9]*; do
		e=$( (tr '\0' '\n' <"$d/environ") 2>/dev/null) || continue
		grep -qx "SLURM_CONF=$SLURM_CONF" <<<"$e" && grep -qx "SLURMD_NODENAME=$node" <<<"$e" || continue
		tasks+=("${d#/proc/}")
		pp=$(awk '{ print $4 }' "$d/stat" 2>/dev/null)
		grep -qa slurmstepd "/proc/$pp/cmdline" 2>/dev/null && steps+=("$pp")
	done
	kill -9 "$(cat "$LAB/slurmd-$node.pid")" "${steps[@]}" "${tasks[@]}" 2>/dev/null
	echo "killed $node: slurmd $(cat "$LAB/slurmd-$node.pid"), slurmstepd ${steps[*]:-none}, tasks ${tasks[*]:-none}"
	scontrol update nodename="$node" state=down reason="e2e: node taken away"
}

# wait_line FILE REGEX SECONDS: until a line matches (0) or the time is up (1)
wait_line() {
	local i
	for i in $(seq 1 $(($3 * 10))); do
		grep -qE -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

c_shrink() {
	local out=$WORK/shrink.out ref=$WORK/shrink-ref ck=$WORK/shrink-ck jid t0 t1 st i
	local A=(--steps 3000 --global-batch 96 --micro-batch 8 --log-every 500 --save-every 200
		 --seed 5 --deterministic)
	[ -z "${ALLOC:-}" ] || { scancel "$ALLOC"; ALLOC=; }	# it holds n3 too
	rm -rf "$ck" "$ref.ck"
	echo "\$ srun -N3 --ntasks-per-node=2 train ${A[*]}   (the uninterrupted reference)"
	timeout 300 srun -N3 --ntasks-per-node=2 "${G[@]}" "$E2E_TRAIN" "${A[@]}" \
		--ckpt-dir "$ref.ck" --print-params "$ref.bin" >"$ref.out" 2>&1 || { show "$ref.out"; fail "the reference run failed"; return 1; }
	echo "\$ sbatch etc/sbatch/shrink.sbatch train ${A[*]}; n3 taken away after the first checkpoint"
	jid=$(sbatch --parsable "${G[@]}" -o "$out" --export=ALL,CKPT="$ck",NODE_WAIT=30 \
		"$E2E_SRCDIR/etc/sbatch/shrink.sbatch" "$E2E_TRAIN" "${A[@]}" --print-params "$WORK/shrink.bin") ||
		fail "sbatch failed" || return 1
	wait_line "$out" '^saved step ' 120 || { show "$out"; fail "no checkpoint within 120 s"; return 1; }
	kill_node n3
	t0=$(e2e_now)
	wait_line "$out" '^resumed from ' 60 || { show "$out"; fail "not resumed within 60 s of the node's loss"; return 1; }
	t1=$(e2e_now)
	for i in $(seq 1 300); do
		st=$(squeue -h -j "$jid" -o %T 2>/dev/null)
		[ -z "$st" ] && break
		sleep 1
	done
	show "$out"
	[ -z "$st" ] || { scancel "$jid"; fail "job $jid still $st after 300 s"; return 1; }
	grep -q '^shrink: .* lost node(s): n3; relaunching on n1,n2$' "$out" || fail "no 'lost node(s): n3' line" || return 1
	grep -qE '^resumed from .* at step [0-9]+ \(world 4\)' "$out" || fail "not resumed at world 4" || return 1
	grep -q '^done: steps 3000 .* world 4 ' "$out" || fail "the relaunched run did not finish 3000 steps" || return 1
	grep -q '^shrink: .* done$' "$out" || fail "the script did not end with 'done'" || return 1
	cmp -s "$ref.bin" "$WORK/shrink.bin" ||
		fail "final parameters differ from the uninterrupted 6-rank run's (deterministic mode)" || return 1
	note "node n3 lost -> training again at world 4 in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s ($(grep -m1 -oE 'at step [0-9]+' "$out")); final parameters bit-identical to the uninterrupted 6-rank run"
}

shrink_cases() {
	if [ -n "$E2E_TRAIN" ]; then
		pcase "node loss: shrink.sbatch, n3 killed + DOWN mid-run: relaunched on n1,n2 (4 ranks) from the checkpoint, same final bits" c_shrink
	fi
}
