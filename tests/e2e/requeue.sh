# SPDX-License-Identifier: BSD-3-Clause
# requeue.sh - sourced by run.sh (part 2, the allocation ALLOC held): save,
# then requeue.  examples/train under etc/sbatch/c-libdpg-requeue.sbatch as a
# 6-rank job (sbatch -N3 --ntasks-per-node=2 --requeue) is sent the warning
# signal mid-run (scancel --signal=USR1); every rank stops at the same step,
# the step is saved, the job exits 75 and requeues itself (same id,
# Restarts=1), resumes from that step and finishes with parameters equal,
# byte for byte, to an uninterrupted --deterministic run's.  Slurm 22.05
# delays a requeued job by AuthInfo=cred_expire + 1 s (1201 s by default):
# the case moves its start to now+3 s (scontrol update StartTime=) once it is
# pending again.

RQ_A=(--steps 1500 --global-batch 48 --micro-batch 4 --log-every 50 --seed 5 --deterministic)

# rq_wait_line FILE REGEX TIMEOUT_S: poll (0.05 s) until FILE has a line
rq_wait_line() {
	local n=$(( $3 * 20 ))
	while [ $n -gt 0 ]; do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
		n=$((n - 1))
	done
	return 1
}

# rq_all_75 FILE: srun says the tasks of all 3 nodes exited 75 (all 6 ranks)
rq_all_75() {
	local n
	n=$(grep -Ec 'srun: error: n[1-3]: tasks [0-9]+-[0-9]+: Exited with exit code 75' "$1")
	[ "$n" = 3 ] || fail "the tasks of $n of 3 nodes exited 75" || return 1
}

# rq_restarts JOB: the job's Restarts= count
rq_restarts() {
	scontrol show job "$1" 2>/dev/null | grep -o 'Restarts=[0-9]*' | cut -d= -f2
}

# rq_release JOB TIMEOUT_S: once requeued (pending, Restarts>=1), start it now
rq_release() {
	local j=$1 n=$(( $2 * 10 )) st
	while [ $n -gt 0 ]; do
		st=$(job_state "$j")
		if [ "$st" = PENDING ] && [ "$(rq_restarts "$j")" -ge 1 ]; then
			scontrol show job "$j" | grep -o 'Reason=[A-Za-z]* .*BeginTime=[^ ]*' | head -1
			# (now: slurmd may still refuse the new credential as revoked)
			scontrol update JobId="$j" StartTime=now+3 && return 0
		fi
		case $st in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) echo "job $j ended $st before its requeue"; return 1;; esac
		sleep 0.1
		n=$((n - 1))
	done
	echo "job $j not requeued (state $st, Restarts=$(rq_restarts "$j"))"
	return 1
}

c_requeue_signal() {
	local w=$WORK/requeue j t0 t1 step saved nstop
	rm -rf "$w"
	mkdir -p "$w"
	echo "\$ srun -N3 --ntasks-per-node=2 train ${RQ_A[*]}   (the uninterrupted reference)"
	timeout 200 srun "${INALLOC[@]}" -N3 --ntasks-per-node=2 "${G[@]}" env DPG_TIMEOUT=60 \
		"$E2E_TRAIN" "${RQ_A[@]}" --print-params "$w/ref.bin" >"$w/ref.out" 2>"$w/ref.err" ||
		{ show "$w/ref.err" stderr; fail "the reference run failed"; return 1; }
	echo "\$ CKPT=$w/ck sbatch -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 c-libdpg-requeue.sbatch train ..."
	j=$(CKPT=$w/ck DPG_TIMEOUT=60 sbatch --parsable -N3 --ntasks-per-node=2 "${G[@]}" -o "$w/job.out" \
		-J e2e-requeue "$E2E_SRCDIR/etc/sbatch/c-libdpg-requeue.sbatch" \
		"$E2E_TRAIN" "${RQ_A[@]}" --print-params "$w/job.bin" 2>&1) ||
		{ echo "$j"; fail "sbatch failed"; return 1; }
	echo "job $j"
	rq_wait_line "$w/job.out" '^step 100/' 120 || { show "$w/job.out"; fail "the job did not reach step 100"; return 1; }
	t0=$(e2e_now)
	scancel --signal=USR1 "$j" || { fail "scancel --signal=USR1 failed"; return 1; }
	rq_wait_line "$w/job.out" '^stopped at step' 60 || { show "$w/job.out"; fail "no 'stopped at step' line"; return 1; }
	t1=$(e2e_now)
	rq_release "$j" 60 || { show "$w/job.out"; return 1; }
	job_wait "$j" 200 || { scontrol show job "$j" | grep -E 'JobState|Restarts|ExitCode|BatchHost'
		show "$w/job.out"; return 1; }
	show "$w/job.out" "job output (both runs)"
	step=$(sed -n 's/^stopped at step \([0-9]*\):.*/\1/p' "$w/job.out")
	saved=$(sed -n 's/^saved step \([0-9]*\) .*/\1/p' "$w/job.out" | tail -1)
	[ -n "$step" ] && [ "$step" = "$saved" ] || fail "stopped at step '$step', saved '$saved'" || return 1
	grep -q "^step-0*$step\$" "$w/ck/latest" 2>/dev/null || grep -q "$step" "$w/ck/latest" ||
		fail "latest is '$(cat "$w/ck/latest")', want step $step" || return 1
	# (Slurm signals node by node: the ranks of a node reached later may be
	# told by the others first, or be gone before their signal comes)
	nstop=$(grep -c 'got User defined signal 1: stopping at this step' "$w/job.out")
	[ "$nstop" -ge 1 ] || fail "no rank logged the signal" || return 1
	rq_all_75 "$w/job.out" || return 1
	grep -q '^requeueing job' "$w/job.out" || fail "the script did not requeue" || return 1
	[ "$(rq_restarts "$j")" = 1 ] || fail "Restarts=$(rq_restarts "$j"), want 1" || return 1
	grep -q "^resumed from .* at step $step (world 6)" "$w/job.out" ||
		fail "no 'resumed from ... at step $step (world 6)'" || return 1
	grep -q '^done: steps 1500 ' "$w/job.out" || fail "the resumed run did not finish" || return 1
	cmp "$w/ref.bin" "$w/job.bin" || fail "final parameters differ from the uninterrupted run" || return 1
	note "job $j: USR1 at step >= 100 -> all 6 ranks ($nstop of them signalled, the rest told) saved step $step and exited 75 in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s (polled); Restarts=1, resumed at $step, final params == uninterrupted ($(stat -c %s "$w/ref.bin") bytes)"
}

# A real time limit: sbatch --time=1 --dpg-requeue=20 on the COMMAND LINE (the
# plugin finds it in /proc/self/cmdline before sbatch reads SBATCH_SIGNAL;
# the template's "#SBATCH --dpg-requeue=120" loses).  slurmctld sends the
# warning when GRACE + 30 s (its check period) reach the end, so between 10
# and 40 s into the 60 s job; the job runs far more steps than it can finish.
# Checked: the ranks got SIGUSR1 (not the limit's SIGTERM), saved the step,
# the job was requeued (Restarts=1) and resumed there; then it is cancelled.
c_requeue_timelimit() {
	local w=$WORK/requeue-tl j t0 t1 step
	rm -rf "$w"
	mkdir -p "$w"
	echo "\$ CKPT=$w/ck sbatch --time=1 --dpg-requeue=20 -N3 --ntasks-per-node=2 c-libdpg-requeue.sbatch train --steps 1000000 ..."
	t0=$(e2e_now)
	j=$(CKPT=$w/ck DPG_TIMEOUT=60 sbatch --parsable --time=1 --dpg-requeue=20 -N3 --ntasks-per-node=2 \
		"${G[@]}" -o "$w/job.out" -J e2e-requeue-tl "$E2E_SRCDIR/etc/sbatch/c-libdpg-requeue.sbatch" \
		"$E2E_TRAIN" --steps 1000000 --global-batch 48 --micro-batch 4 --log-every 500 --seed 5 2>&1) ||
		{ echo "$j"; fail "sbatch failed"; return 1; }
	echo "job $j"
	rq_wait_line "$w/job.out" '^stopped at step' 75 || { show "$w/job.out"; fail "no stop before the time limit"; return 1; }
	t1=$(e2e_now)
	rq_release "$j" 60 || { show "$w/job.out"; return 1; }
	rq_wait_line "$w/job.out" '^resumed from' 60 || { show "$w/job.out"; fail "the requeued job did not resume"; return 1; }
	scancel "$j"
	show "$w/job.out" "job output"
	step=$(sed -n 's/^stopped at step \([0-9]*\):.*/\1/p' "$w/job.out")
	sed '/^requeueing job/q' "$w/job.out" >"$w/run1.out"
	grep -q 'got User defined signal 1: stopping at this step' "$w/run1.out" ||
		fail "no rank got Slurm's warning (SIGUSR1)" || return 1
	! grep -q 'got Terminated' "$w/run1.out" || fail "a rank got the time limit's SIGTERM first" || return 1
	rq_all_75 "$w/run1.out" || return 1
	grep -q "^saved step $step " "$w/job.out" || fail "step $step was not saved" || return 1
	[ "$(rq_restarts "$j")" = 1 ] || fail "Restarts=$(rq_restarts "$j"), want 1" || return 1
	grep -q "^resumed from .* at step $step (world 6)" "$w/job.out" ||
		fail "no 'resumed from ... at step $step (world 6)'" || return 1
	note "job $j (--time=1, GRACE 20 s): Slurm's SIGUSR1 stopped all 6 ranks at step $step, $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", b-a}') s after sbatch; requeued, resumed at $step"
}

# The PyTorch side: examples/torch_requeue.py (DDP on gloo, DCP checkpoint)
# under the same template, warned mid-run; its final parameters (sha256) equal
# an uninterrupted run's.
c_requeue_torch() {
	local w=$WORK/requeue-torch j step ref got
	local A=(--steps 1200)
	rm -rf "$w"
	mkdir -p "$w"
	echo "\$ srun -N3 --ntasks-per-node=2 $PYENV torch_requeue.py ${A[*]}   (the uninterrupted reference)"
	timeout 300 srun "${INALLOC[@]}" -N3 --ntasks-per-node=2 "${G[@]}" \
		"$PYENV" "$E2E_SRCDIR/examples/torch_requeue.py" "${A[@]}" >"$w/ref.out" 2>"$w/ref.err" ||
		{ show "$w/ref.err" stderr; fail "the reference run failed"; return 1; }
	j=$(CKPT=$w/ck sbatch --parsable -N3 --ntasks-per-node=2 "${G[@]}" -o "$w/job.out" \
		-J e2e-requeue-torch "$E2E_SRCDIR/etc/sbatch/c-libdpg-requeue.sbatch" \
		"$PYENV" "$E2E_SRCDIR/examples/torch_requeue.py" "${A[@]}" 2>&1) ||
		{ echo "$j"; fail "sbatch failed"; return 1; }
	echo "job $j"
	rq_wait_line "$w/job.out" '^step 200/' 200 || { show "$w/job.out"; fail "the job did not reach step 200"; return 1; }
	scancel --signal=USR1 "$j" || { fail "scancel --signal=USR1 failed"; return 1; }
	rq_wait_line "$w/job.out" '^stopped at step' 60 || { show "$w/job.out"; fail "no 'stopped at step' line"; return 1; }
	rq_release "$j" 60 || { show "$w/job.out"; return 1; }
	job_wait "$j" 300 || { scontrol show job "$j" | grep -E 'JobState|Restarts|ExitCode'
		show "$w/job.out"; return 1; }
	grep -v '^step ' "$w/job.out" | sed -n '1,40p'
	step=$(sed -n 's/^stopped at step \([0-9]*\):.*/\1/p' "$w/job.out")
	[ "$(rq_restarts "$j")" = 1 ] || fail "Restarts=$(rq_restarts "$j"), want 1" || return 1
	grep -q "^resumed from .* at step $step\$" "$w/job.out" || fail "no 'resumed ... at step $step'" || return 1
	ref=$(sed -n 's/^done: .* sha256 //p' "$w/ref.out")
	got=$(sed -n 's/^done: .* sha256 //p' "$w/job.out")
	[ -n "$ref" ] && [ "$ref" = "$got" ] || fail "final parameters: sha256 $got, uninterrupted $ref" || return 1
	note "torch $("$PYENV" -c 'import torch; print(torch.__version__)'): stopped at $step, requeued, resumed; sha256 ${got:0:12}... == uninterrupted"
}

# The site's default (plugstack "requeue=45"), no option given: sbatch set
# SBATCH_SIGNAL=USR1@45 for the job (it stays in the batch script's
# environment), and the step's tasks got DPG_REQUEUE=45; a user's own
# --dpg-requeue=0 on the command line turns both off.
c_requeue_default() {
	local w=$WORK/requeue-default j
	mkdir -p "$w"
	plugstack "optional $PLUGIN_SO requeue=45"
	j=$(sbatch --parsable -N1 -n1 -o "$w/on.out" -J e2e-requeue-def \
		--wrap 'echo "batch SBATCH_SIGNAL=${SBATCH_SIGNAL:-unset}"; srun --dpg-gpus-per-task=0 printenv DPG_REQUEUE' 2>&1) ||
		{ plugstack_restore; fail "sbatch: $j"; return 1; }
	job_wait "$j" 60 || { plugstack_restore; show "$w/on.out"; return 1; }
	j=$(sbatch --parsable --dpg-requeue=0 -N1 -n1 -o "$w/off.out" -J e2e-requeue-def \
		--wrap 'echo "batch SBATCH_SIGNAL=${SBATCH_SIGNAL:-unset}"; srun --dpg-gpus-per-task=0 printenv DPG_REQUEUE || echo "task DPG_REQUEUE unset"' 2>&1) ||
		{ plugstack_restore; fail "sbatch: $j"; return 1; }
	job_wait "$j" 60 || { plugstack_restore; show "$w/off.out"; return 1; }
	plugstack_restore
	show "$w/on.out" "requeue=45"
	show "$w/off.out" "requeue=45, sbatch --dpg-requeue=0"
	grep -qx 'batch SBATCH_SIGNAL=USR1@45' "$w/on.out" || fail "no SBATCH_SIGNAL=USR1@45 in the job" || return 1
	grep -qx '45' "$w/on.out" || fail "the task did not get DPG_REQUEUE=45" || return 1
	grep -qx 'batch SBATCH_SIGNAL=unset' "$w/off.out" || fail "--dpg-requeue=0 still set SBATCH_SIGNAL" || return 1
	grep -qx 'task DPG_REQUEUE unset' "$w/off.out" || fail "--dpg-requeue=0 still exported DPG_REQUEUE" || return 1
	note "requeue=45: job got SBATCH_SIGNAL=USR1@45, tasks DPG_REQUEUE=45; --dpg-requeue=0 turns both off"
}

requeue_cases() {
	[ -n "$E2E_TRAIN" ] || { skip_case "requeue" "no examples/train"; return 0; }
	pcase "requeue: plugstack requeue=45 is the default (SBATCH_SIGNAL=USR1@45, DPG_REQUEUE=45); --dpg-requeue=0 turns it off" \
		c_requeue_default
	pcase "requeue: 6-rank sbatch job, scancel --signal=USR1 mid-run: all save one step, exit 75, requeued (Restarts=1), resumed, params == uninterrupted" \
		c_requeue_signal
	pcase "requeue: sbatch --time=1 --dpg-requeue=20 (command line): Slurm's own warning stops all 6 ranks before the limit, saved, requeued, resumed" \
		c_requeue_timelimit
	if [ -n "$PYENV" ] && "$PYENV" -c 'import torch.distributed.checkpoint' 2>/dev/null; then
		pcase "requeue: torch_requeue.py (DDP gloo, DCP) 6 ranks, USR1 mid-run: requeued, resumed, params == uninterrupted" \
			c_requeue_torch
	else
		skip_case "requeue: torch_requeue.py" "no DPG_PYENV python with torch.distributed.checkpoint"
	fi
}
