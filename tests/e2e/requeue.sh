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
# pending again.  Also: a real --time=1 limit; two USR1 while the job saves
# and two during start-up (before dpg_init), with a bash and a dash wrapper;
# examples/torch_requeue.py under etc/sbatch/torch-requeue.sbatch (its
# atomic DCP layout checked), warned by hand and by a real --time=1 limit;
# the plugstack default requeue=45.  Last
# (requeue_preempt_cases, once the allocation has gone): real preemption by
# a job of a higher-tier partition, PreemptMode=REQUEUE and CANCEL.

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

# rq_requeued JOB TIMEOUT_S: wait until the job is requeued (pending,
# Restarts>=1); its first run has ended then
rq_requeued() {
	local j=$1 n=$(( $2 * 10 )) st
	while [ $n -gt 0 ]; do
		st=$(job_state "$j")
		if [ "$st" = PENDING ] && [ "$(rq_restarts "$j")" -ge 1 ]; then
			scontrol show job "$j" | grep -o 'Reason=[A-Za-z]* .*BeginTime=[^ ]*' | head -1
			return 0
		fi
		case $st in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) echo "job $j ended $st before its requeue"; return 1;; esac
		sleep 0.1
		n=$((n - 1))
	done
	echo "job $j not requeued (state $st, Restarts=$(rq_restarts "$j"))"
	return 1
}

# rq_release JOB TIMEOUT_S: once requeued, start it now
rq_release() {
	rq_requeued "$@" || return 1
	# (now: slurmd may still refuse the new credential as revoked)
	scontrol update JobId="$1" StartTime=now+3
}

# rq_ckpt_ok DIR STEP NSHARDS: DIR is a clean checkpoint directory whose
# latest names STEP: "step-%08d", that step's meta and NSHARDS shards are
# there, and no writer's leftover (*.tmp.*) is anywhere under DIR
rq_ckpt_ok() {
	local d=$1 step=$2 n=$3 sd want left i
	want=$(printf 'step-%08d' "$step")
	[ "$(cat "$d/latest" 2>/dev/null)" = "$want" ] ||
		fail "$d/latest is '$(cat "$d/latest" 2>/dev/null)', want '$want'" || return 1
	sd=$d/$want
	[ -s "$sd/meta" ] || fail "$want has no meta" || return 1
	for i in $(seq 0 $((n - 1))); do
		[ -s "$(printf '%s/shard-%05d' "$sd" "$i")" ] || fail "$want has no shard $i" || return 1
	done
	left=$(find "$d" -name '*.tmp.*' | head -3)
	[ -z "$left" ] || fail "leftovers of a save: $left" || return 1
}

# rq_reference BIN NAME ARGS...: the uninterrupted 6-rank run of train ARGS,
# once per e2e run: its final parameters in BIN, its output in NAME.out
# under WORK (inside the allocation while there is one)
rq_reference() {
	local bin=$1 out=$WORK/$2.out in=()
	shift 2
	[ -s "$bin" ] && return 0
	[ -z "${ALLOC:-}" ] || in=("${INALLOC[@]}")
	echo "\$ srun -N3 --ntasks-per-node=2 train $*   (the uninterrupted reference)"
	timeout 200 srun "${in[@]}" -N3 --ntasks-per-node=2 "${G[@]}" env DPG_TIMEOUT=60 \
		"$E2E_TRAIN" "$@" --print-params "$bin.part" >"$out" 2>&1 &&
		mv "$bin.part" "$bin" ||
		{ show "$out"; fail "the reference run failed"; }
}

# rq_ref: the reference of RQ_A, its final parameters in $RQ_REF
rq_ref() {
	RQ_REF=$WORK/requeue-ref.bin
	rq_reference "$RQ_REF" requeue-ref "${RQ_A[@]}"
}

# rq_sbatch_train NAME DIR: submit the 6-rank c-libdpg-requeue.sbatch job of
# train RQ_A (checkpoints in DIR/ck, output DIR/job.out, final parameters
# DIR/job.bin); prints the job id, or sbatch's error
rq_sbatch_train() {
	CKPT=$2/ck DPG_TIMEOUT=60 sbatch --parsable -N3 --ntasks-per-node=2 "${G[@]}" -o "$2/job.out" \
		-J "$1" "$E2E_SRCDIR/etc/sbatch/c-libdpg-requeue.sbatch" \
		"$E2E_TRAIN" "${RQ_A[@]}" --print-params "$2/job.bin" 2>&1
}

c_requeue_signal() {
	local w=$WORK/requeue j t0 t1 step saved nstop
	rm -rf "$w"
	mkdir -p "$w"
	rq_ref || return 1
	echo "\$ CKPT=$w/ck sbatch -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 c-libdpg-requeue.sbatch train ..."
	j=$(rq_sbatch_train e2e-requeue "$w") ||
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
	rq_ckpt_ok "$w/ck" "$step" 6 || return 1
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
	cmp "$RQ_REF" "$w/job.bin" || fail "final parameters differ from the uninterrupted run" || return 1
	note "job $j: USR1 at step >= 100 -> all 6 ranks ($nstop of them signalled, the rest told) saved step $step and exited 75 in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s (polled); Restarts=1, resumed at $step, final params == uninterrupted ($(stat -c %s "$RQ_REF") bytes)"
}

# A real time limit: sbatch --time=1 --dpg-requeue=20 on the COMMAND LINE (the
# plugin finds it in /proc/self/cmdline before sbatch reads SBATCH_SIGNAL;
# the template's "#SBATCH --dpg-requeue=120" loses).  slurmctld sends the
# warning when GRACE + 30 s (its check period) reach the end, so between 10
# and 40 s into the 60 s job; the job runs far more steps than it can finish.
# rq_timelimit W NAME CHECK SCRIPT ARGS...: such a 6-rank job of
# etc/sbatch/SCRIPT ARGS (CKPT=W/ck, output W/job.out; the caller's VAR=VAL
# before it reach sbatch).  Checked: the ranks got SIGUSR1 (not the limit's
# SIGTERM), all 6 exited 75, the step was saved ("CHECK W/ck STEP" once the
# job is pending again), the job was requeued (Restarts=1) and resumed
# there; then it is cancelled.  Sets RQ_J, RQ_STEP, RQ_NSIG (ranks that
# logged the signal) and RQ_SECS (sbatch to "stopped at step", polled).
rq_timelimit() {
	local w=$1 name=$2 check=$3 script=$4 t0 t1
	shift 4
	rm -rf "$w"
	mkdir -p "$w"
	echo "\$ CKPT=$w/ck sbatch --time=1 --dpg-requeue=20 -N3 --ntasks-per-node=2 $script $*"
	t0=$(e2e_now)
	RQ_J=$(CKPT=$w/ck DPG_TIMEOUT=60 sbatch --parsable --time=1 --dpg-requeue=20 -N3 --ntasks-per-node=2 \
		"${G[@]}" -o "$w/job.out" -J "$name" "$E2E_SRCDIR/etc/sbatch/$script" "$@" 2>&1) ||
		{ echo "$RQ_J"; fail "sbatch failed"; return 1; }
	echo "job $RQ_J"
	rq_wait_line "$w/job.out" '^stopped at step' 75 ||
		{ show "$w/job.out"; scancel "$RQ_J"; fail "no stop before the time limit"; return 1; }
	t1=$(e2e_now)
	RQ_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
	RQ_STEP=$(sed -n 's/^stopped at step \([0-9]*\):.*/\1/p' "$w/job.out")
	rq_requeued "$RQ_J" 60 || { show "$w/job.out"; scancel "$RQ_J"; return 1; }
	echo "--- $w/ck after the save:"; ls -A "$w/ck"
	"$check" "$w/ck" "$RQ_STEP" || { scancel "$RQ_J"; return 1; }
	# (now: slurmd may still refuse the new credential as revoked)
	scontrol update JobId="$RQ_J" StartTime=now+3 || { scancel "$RQ_J"; fail "cannot release job $RQ_J"; return 1; }
	rq_wait_line "$w/job.out" '^resumed from' 60 ||
		{ show "$w/job.out"; scancel "$RQ_J"; fail "the requeued job did not resume"; return 1; }
	scancel "$RQ_J"
	show "$w/job.out" "job output"
	sed '/^requeueing job/q' "$w/job.out" >"$w/run1.out"
	RQ_NSIG=$(grep -c 'got User defined signal 1: stopping at' "$w/run1.out")
	[ "$RQ_NSIG" -ge 1 ] || fail "no rank got Slurm's warning (SIGUSR1)" || return 1
	! grep -q 'got Terminated' "$w/run1.out" || fail "a rank got the time limit's SIGTERM first" || return 1
	rq_all_75 "$w/run1.out" || return 1
	grep -q "^saved step $RQ_STEP " "$w/run1.out" || fail "step '$RQ_STEP' was not saved" || return 1
	[ "$(rq_restarts "$RQ_J")" = 1 ] || fail "Restarts=$(rq_restarts "$RQ_J"), want 1" || return 1
	grep -Eq "^resumed from .* at step $RQ_STEP( |\$)" "$w/job.out" ||
		fail "no 'resumed from ... at step $RQ_STEP'" || return 1
}

rq_ckpt_ok6() { rq_ckpt_ok "$1" "$2" 6; }

c_requeue_timelimit() {
	rq_timelimit "$WORK/requeue-tl" e2e-requeue-tl rq_ckpt_ok6 c-libdpg-requeue.sbatch \
		"$E2E_TRAIN" --steps 1000000 --global-batch 48 --micro-batch 4 --log-every 500 --seed 5 || return 1
	grep -q "^resumed from .* at step $RQ_STEP (world 6)" "$WORK/requeue-tl/job.out" ||
		fail "no 'resumed from ... at step $RQ_STEP (world 6)'" || return 1
	note "job $RQ_J (--time=1, GRACE 20 s): Slurm's SIGUSR1 stopped all 6 ranks ($RQ_NSIG logged it) at step $RQ_STEP, $RQ_SECS s after sbatch; saved, requeued, resumed at $RQ_STEP"
}

# rq_urgent JOB OUT SLEEP_S: submit a job to partition urgent that needs the
# three nodes whole; it prints when it starts (with JOB's JobState= then) and
# ends, and sleeps SLEEP_S between; prints its id
rq_urgent() {
	sbatch --parsable -p urgent -N3 --exclusive -o "$2" -J e2e-urgent \
		--wrap "echo \"urgent start \$(date +%s.%N), job $1 \$(scontrol show job $1 | grep -o 'JobState=[A-Z_]*')\"; sleep $3; echo \"urgent end \$(date +%s.%N)\"" 2>&1
}

# Preemption.  run.sh starts the cluster with PREEMPT_GRACE=60 (minicluster.sh:
# PreemptType=preempt/partition_prio; partition debug, the default, PriorityTier=1
# PreemptMode=REQUEUE GraceTime=60; partition urgent, same nodes, PriorityTier=2)
# and runs this after the allocation ALLOC has gone (urgent would preempt it
# too).  The 6-rank job of c_requeue_signal runs in debug; after step 100 a job
# that needs the three nodes whole (sbatch -p urgent -N3 --exclusive) comes.
# Slurm 22.05 (slurmctld/preempt.c) signals the steps of the job at once:
# SIGCONT and SIGTERM, or with SlurmctldParameters=preempt_send_user_signal
# the job's --signal (USR1, from --dpg-requeue) if not sent yet; GraceTime
# later it requeues (REQUEUE) or kills (CANCEL) the job if it still runs.
# Checked: every rank stops at one step (the signal named), it is saved, all
# exit 75, the script requeues the job inside the grace (so slurmctld's log
# has no "preempted JobId=J has been requeued/killed": nobody requeues it
# twice, Restarts=1), the urgent job starts only after that and completes,
# the job resumes at that step after it and ends with the uninterrupted
# run's parameters.  MODE requeue: the cluster as started, SIGTERM; MODE
# cancel: debug PreemptMode=CANCEL + preempt_send_user_signal, SIGUSR1.
c_requeue_preempt() {
	local mode=$1 w=$WORK/requeue-preempt-$1 j u t0 t1 t2 tu0 tu1 step nsig sig other log
	rq_ref || return 1
	rm -rf "$w"
	mkdir -p "$w"
	case $mode in
	requeue) sig=Terminated other='User defined signal 1';;
	cancel) sig='User defined signal 1' other=Terminated;;
	esac
	echo "\$ scontrol show partition (debug, urgent):"
	scontrol show partition debug | grep -E 'PartitionName|PriorityTier|PreemptMode|GraceTime' | sed 's/^ */  /'
	scontrol show partition urgent | grep -E 'PartitionName|PriorityTier|PreemptMode' | sed 's/^ */  /' ||
		{ fail "no partition urgent (minicluster PREEMPT_GRACE unset?)"; return 1; }
	echo "\$ CKPT=$w/ck sbatch -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 c-libdpg-requeue.sbatch train ${RQ_A[*]}"
	j=$(rq_sbatch_train e2e-preempted "$w") ||
		{ echo "$j"; fail "sbatch failed"; return 1; }
	echo "job $j"
	rq_wait_line "$w/job.out" '^step 100/' 120 || { show "$w/job.out"; fail "the job did not reach step 100"; return 1; }
	t0=$(e2e_now)
	u=$(rq_urgent "$j" "$w/urgent.out" 5) ||
		{ echo "$u"; scancel "$j"; fail "sbatch -p urgent failed"; return 1; }
	echo "\$ sbatch -p urgent -N3 --exclusive --wrap 'sleep 5'  -> job $u (at step >= 100 of job $j)"
	rq_wait_line "$w/job.out" '^stopped at step' 60 ||
		{ show "$w/job.out"; scancel "$j" "$u"; fail "no 'stopped at step' line within 60 s of the urgent job"; return 1; }
	t1=$(e2e_now)
	rq_requeued "$j" 60 || { show "$w/job.out"; scancel "$j" "$u"; return 1; }
	# (released only once the urgent job runs: a job started before it
	# would be preempted again)
	rq_wait_line "$w/urgent.out" '^urgent start' 60 ||
		{ scontrol show job "$u" | grep -E 'JobState|Reason'; scancel "$j" "$u"; fail "the urgent job did not start"; return 1; }
	scontrol update JobId="$j" StartTime=now+3 || { scancel "$j" "$u"; fail "cannot release job $j"; return 1; }
	job_wait "$u" 60 || { show "$w/urgent.out"; scancel "$j"; fail "the urgent job did not complete"; return 1; }
	rq_wait_line "$w/job.out" '^resumed from' 60 || { show "$w/job.out"; scancel "$j"; fail "the job did not resume"; return 1; }
	t2=$(e2e_now)
	job_wait "$j" 200 || { scontrol show job "$j" | grep -E 'JobState|Restarts|ExitCode'; show "$w/job.out"; return 1; }
	show "$w/job.out" "job output (both runs)"
	show "$w/urgent.out" "urgent job output"
	sed '/^requeueing job/q' "$w/job.out" >"$w/run1.out"
	step=$(sed -n 's/^stopped at step \([0-9]*\):.*/\1/p' "$w/job.out")
	[ -n "$step" ] && grep -q "^saved step $step " "$w/run1.out" || fail "stopped at step '$step', not saved" || return 1
	rq_ckpt_ok "$w/ck" "$step" 6 || return 1
	nsig=$(grep -c "got $sig: stopping at this step" "$w/run1.out")
	[ "$nsig" -ge 1 ] || fail "no rank logged 'got $sig' (preemption, PreemptMode=$mode)" || return 1
	! grep -q "got $other" "$w/run1.out" || fail "a rank got $other, want $sig" || return 1
	rq_all_75 "$w/run1.out" || return 1
	grep -q '^requeueing job' "$w/job.out" || fail "the script did not requeue" || return 1
	[ "$(rq_restarts "$j")" = 1 ] || fail "Restarts=$(rq_restarts "$j"), want 1" || return 1
	log=$(grep -E "preempted JobId=$j( |$)" "$LAB/log/slurmctld.log")
	[ -z "$log" ] || fail "slurmctld acted on the job itself: $log" || return 1
	grep -q "^urgent start .*, job $j JobState=PENDING$" "$w/urgent.out" ||
		fail "job $j was not pending (requeued) when the urgent job started: no preemption" || return 1
	tu0=$(sed -n 's/^urgent start \([0-9.]*\),.*/\1/p' "$w/urgent.out")
	tu1=$(sed -n 's/^urgent end //p' "$w/urgent.out")
	grep -q "^resumed from .* at step $step (world 6)" "$w/job.out" ||
		fail "no 'resumed from ... at step $step (world 6)'" || return 1
	grep -q '^done: steps 1500 ' "$w/job.out" || fail "the resumed run did not finish" || return 1
	cmp "$RQ_REF" "$w/job.bin" || fail "final parameters differ from the uninterrupted run" || return 1
	note "PreemptMode=$(tr a-z A-Z <<<"$mode") job $j preempted by urgent job $u at step >= 100: '$sig' ($nsig ranks logged it, the rest told); all 6 saved step $step and exited 75 $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s after the urgent sbatch (polled); script requeued it (Restarts=1, slurmctld did not); urgent ran $(awk -v a="$t0" -v b="$tu0" 'BEGIN{printf "%.2f", b-a}')-$(awk -v a="$t0" -v b="$tu1" 'BEGIN{printf "%.2f", b-a}') s; training again (resumed at $step) $(awk -v a="$t0" -v b="$t2" 'BEGIN{printf "%.2f", b-a}') s after the urgent sbatch ($(awk -v a="$tu1" -v b="$t2" 'BEGIN{printf "%.2f", b-a}') s after it ended); params == uninterrupted"
}

# A save that outlasts the grace: what Slurm 22.05 does then.  The tasks are
# a stand-in (bash) that logs each SIGTERM and ends its "save" (exit 75) 2 s
# after the second, which comes when slurmctld acts on the job: GraceTime
# (here 5 s) or up to 30 s more later (it checks every 30 s, in
# job_time_limit).  Checked: the second SIGTERM came 5-40 s after the first;
# the batch script got it too and died (no "requeueing job" line) while the
# six tasks lived on to end their "saves" (SIGKILL only KillWait later).  MODE requeue: slurmctld requeued the
# job itself ("preempted JobId=J has been requeued" in its log), once
# (Restarts=1); released after the urgent job, its second run completes.
# MODE cancel: the job ends PREEMPTED, Restarts=0, not requeued ("has been
# killed").  debug's PreemptMode and GraceTime are put back afterwards.
c_requeue_preempt_overrun() {
	local mode=$1 w=$WORK/requeue-overrun-$1 want rc
	rm -rf "$w"
	mkdir -p "$w"
	cat >"$w/slow-save" <<'SLOW'
#!/bin/bash
# a program whose save outlasts the preemption's GraceTime
[ "${SLURM_RESTART_COUNT:-0}" = 0 ] || { echo "rank $SLURM_PROCID: run 2"; exit 0; }
# (no command substitution in the trap: a SIGTERM to the step kills it)
n=0
trap 'n=$((n + 1)); echo "rank $SLURM_PROCID got SIGTERM $n at ${EPOCHREALTIME/,/.}"' TERM
echo "rank $SLURM_PROCID running"
while [ $n -lt 2 ]; do sleep 0.2; done
end=$((SECONDS + 2))	# "saving" 2 s on after slurmctld's SIGTERM
while [ $SECONDS -lt $end ]; do sleep 0.2; done
echo "rank $SLURM_PROCID saved, exit 75"
exit 75
SLOW
	chmod 755 "$w/slow-save"
	want=$(tr a-z A-Z <<<"$mode")
	scontrol update PartitionName=debug PreemptMode="$want" GraceTime=5 || { fail "scontrol update PartitionName=debug failed"; return 1; }
	scontrol show partition debug | grep -E 'PreemptMode|GraceTime' | sed 's/^ */  /'
	c_requeue_overrun_run "$mode" "$w"
	rc=$?
	scontrol update PartitionName=debug PreemptMode=REQUEUE GraceTime=60 ||
		{ fail "cannot put debug back to PreemptMode=REQUEUE GraceTime=60"; return 1; }
	return $rc
}

c_requeue_overrun_run() {
	local mode=$1 w=$2 j u t1 t2 r st log want
	echo "\$ sbatch -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 c-libdpg-requeue.sbatch slow-save"
	j=$(CKPT=$w/ck sbatch --parsable -N3 --ntasks-per-node=2 "${G[@]}" -o "$w/job.out" -J e2e-overrun \
		"$E2E_SRCDIR/etc/sbatch/c-libdpg-requeue.sbatch" "$w/slow-save" 2>&1) ||
		{ echo "$j"; fail "sbatch failed"; return 1; }
	echo "job $j"
	rq_wait_line "$w/job.out" '^rank 5 running' 60 && rq_wait_line "$w/job.out" '^rank 0 running' 5 ||
		{ show "$w/job.out"; scancel "$j"; fail "the stand-in did not start"; return 1; }
	sleep 0.5
	u=$(rq_urgent "$j" "$w/urgent.out" 1) || { echo "$u"; scancel "$j"; fail "sbatch -p urgent failed"; return 1; }
	echo "urgent job $u"
	rq_wait_line "$w/urgent.out" '^urgent end' 90 ||
		{ show "$w/job.out"; scontrol show job "$j" | grep -E 'JobState|Restarts'; scancel "$j" "$u"; fail "the urgent job did not run within 90 s"; return 1; }
	if [ "$mode" = requeue ]; then
		rq_requeued "$j" 10 || { show "$w/job.out"; scancel "$j"; return 1; }
		scontrol update JobId="$j" StartTime=now+3
		job_wait "$j" 60 || { show "$w/job.out"; return 1; }
	else
		job_wait "$j" 30
	fi
	show "$w/job.out" "job output"
	show "$w/urgent.out" "urgent job output"
	st=$(job_state "$j")
	log=$(grep -E "preempted JobId=$j( |$)" "$LAB/log/slurmctld.log")
	echo "job $j: $st, Restarts=$(rq_restarts "$j"); slurmctld: $log"
	for r in 0 1 2 3 4 5; do
		t1=$(sed -n "s/^rank $r got SIGTERM 1 at //p" "$w/job.out")
		t2=$(sed -n "s/^rank $r got SIGTERM 2 at //p" "$w/job.out" | head -1)
		[ -n "$t1" ] && [ -n "$t2" ] || fail "rank $r: not two SIGTERMs" || return 1
		awk -v a="$t1" -v b="$t2" 'BEGIN { exit !(b - a >= 4.5 && b - a <= 40) }' ||
			fail "rank $r: second SIGTERM $(awk -v a="$t1" -v b="$t2" 'BEGIN{printf "%.1f", b-a}') s after the first, want 5-40" || return 1
		grep -q "^rank $r saved, exit 75" "$w/job.out" || fail "rank $r did not end its save" || return 1
	done
	! grep -q '^requeueing job' "$w/job.out" || fail "the batch script survived to requeue the job" || return 1
	want=PENDING; [ "$mode" = requeue ] || want=PREEMPTED
	grep -q "^urgent start .*, job $j JobState=$want$" "$w/urgent.out" ||
		fail "job $j was not $want when the urgent job started" || return 1
	if [ "$mode" = requeue ]; then
		[ "$st" = COMPLETED ] && [ "$(rq_restarts "$j")" = 1 ] ||
			fail "job $j $st, Restarts=$(rq_restarts "$j"); want COMPLETED, 1" || return 1
		grep -q "has been requeued" <<<"$log" || fail "slurmctld did not log the requeue" || return 1
		[ "$(grep -c ': run 2$' "$w/job.out")" = 6 ] || fail "no second run of 6 ranks" || return 1
	else
		[ "$st" = PREEMPTED ] && [ "$(rq_restarts "$j")" = 0 ] ||
			fail "job $j $st, Restarts=$(rq_restarts "$j"); want PREEMPTED, 0" || return 1
		grep -q "has been killed" <<<"$log" || fail "slurmctld did not log the kill" || return 1
	fi
	note "GraceTime=5, PreemptMode=$(tr a-z A-Z <<<"$mode"), save longer than that: 2nd SIGTERM $(awk -v a="$t1" -v b="$t2" 'BEGIN{printf "%.1f", b-a}') s after the 1st (rank 5); the batch script died with it (no scontrol requeue), the saves ended inside KillWait; job $j $st, Restarts=$(rq_restarts "$j"), slurmctld: '${log#*] }'"
}

# The same preempted job with PreemptMode=CANCEL and
# SlurmctldParameters=preempt_send_user_signal (slurm.conf changed,
# scontrol reconfigure; put back afterwards, whatever the outcome)
c_requeue_preempt_cancel() {
	local conf=$LAB/slurm.conf rc
	cp "$conf" "$WORK/slurm.conf.preempt" || return 1
	sed -i -e '/^PartitionName=debug /s/PreemptMode=REQUEUE/PreemptMode=CANCEL/' \
		-e 's/^MailProg=.*/&\nSlurmctldParameters=preempt_send_user_signal/' "$conf"
	grep -E '^SlurmctldParameters|^PartitionName=debug' "$conf"
	if scontrol reconfigure && grep -q 'PreemptMode=CANCEL' <<<"$(scontrol show partition debug)"; then
		c_requeue_preempt cancel
		rc=$?
	else
		rc=1
		fail "debug did not become PreemptMode=CANCEL after scontrol reconfigure"
	fi
	cp "$WORK/slurm.conf.preempt" "$conf"
	scontrol reconfigure || { fail "scontrol reconfigure (restoring slurm.conf) failed"; return 1; }
	return $rc
}

# torch_requeue.py's checkpoint directory DIR after a save of STEP: latest
# names "step-%08d", that directory holds DCP's .metadata, nothing at DIR's
# top but latest and step-* directories, no unfinished step-*.tmp one
rq_dcp_ok() {
	local d=$1 step=$2 want extra
	want=$(printf 'step-%08d' "$step")
	[ "$(cat "$d/latest" 2>/dev/null)" = "$want" ] ||
		fail "$d/latest is '$(cat "$d/latest" 2>/dev/null)', want '$want'" || return 1
	[ -s "$d/$want/.metadata" ] && compgen -G "$d/$want/*.distcp" >/dev/null ||
		fail "$want has no .metadata or no .distcp file" || return 1
	extra=$(ls -A "$d" | grep -Ev '^(latest|step-[0-9]{8})$')
	[ -z "$extra" ] || fail "$d holds more than latest and step-N: $(echo $extra)" || return 1
}

# The PyTorch side: examples/torch_requeue.py (DDP on gloo, DCP checkpoint)
# under etc/sbatch/torch-requeue.sbatch, warned mid-run; the save is atomic
# (step-N.tmp renamed step-N, then latest replaced) and its final parameters
# (sha256) equal an uninterrupted run's.
c_requeue_torch() {
	local w=$WORK/requeue-torch j step ref got
	local A=(--steps 1200)
	rm -rf "$w"
	mkdir -p "$w"
	echo "\$ srun -N3 --ntasks-per-node=2 $PYENV torch_requeue.py ${A[*]}   (the uninterrupted reference)"
	timeout 300 srun "${INALLOC[@]}" -N3 --ntasks-per-node=2 "${G[@]}" \
		"$PYENV" "$E2E_SRCDIR/examples/torch_requeue.py" "${A[@]}" >"$w/ref.out" 2>"$w/ref.err" ||
		{ show "$w/ref.err" stderr; fail "the reference run failed"; return 1; }
	echo "\$ CKPT=$w/ck PYTHON=$PYENV TRAIN=torch_requeue.py sbatch -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 torch-requeue.sbatch ${A[*]}"
	j=$(CKPT=$w/ck PYTHON=$PYENV TRAIN=$E2E_SRCDIR/examples/torch_requeue.py sbatch --parsable \
		-N3 --ntasks-per-node=2 "${G[@]}" -o "$w/job.out" -J e2e-requeue-torch \
		"$E2E_SRCDIR/etc/sbatch/torch-requeue.sbatch" "${A[@]}" 2>&1) ||
		{ echo "$j"; fail "sbatch failed"; return 1; }
	echo "job $j"
	rq_wait_line "$w/job.out" '^step 200/' 200 || { show "$w/job.out"; fail "the job did not reach step 200"; return 1; }
	scancel --signal=USR1 "$j" || { fail "scancel --signal=USR1 failed"; return 1; }
	rq_wait_line "$w/job.out" '^stopped at step' 60 || { show "$w/job.out"; fail "no 'stopped at step' line"; return 1; }
	rq_requeued "$j" 60 || { show "$w/job.out"; return 1; }
	step=$(sed -n 's/^stopped at step \([0-9]*\):.*/\1/p' "$w/job.out")
	echo "--- $w/ck after the save:"; ls -A "$w/ck" "$w/ck"/step-*
	rq_dcp_ok "$w/ck" "$step" || return 1
	scontrol update JobId="$j" StartTime=now+3 || { fail "cannot release job $j"; return 1; }
	job_wait "$j" 300 || { scontrol show job "$j" | grep -E 'JobState|Restarts|ExitCode'
		show "$w/job.out"; return 1; }
	grep -v '^step ' "$w/job.out" | sed -n '1,40p'
	grep -q '^run 1 of job [0-9]*: from scratch$' "$w/job.out" && grep -q '^run 2 of job [0-9]*: --resume$' "$w/job.out" ||
		fail "no 'run 1 ... from scratch' and 'run 2 ... --resume' lines from the template" || return 1
	grep -q "^saved step $step in $w/ck/$(printf 'step-%08d' "$step")\$" "$w/job.out" ||
		fail "no 'saved step $step in .../step-N' line" || return 1
	[ "$(rq_restarts "$j")" = 1 ] || fail "Restarts=$(rq_restarts "$j"), want 1" || return 1
	grep -q "^resumed from $w/ck/$(printf 'step-%08d' "$step") at step $step\$" "$w/job.out" ||
		fail "no 'resumed from $w/ck/step-N at step $step'" || return 1
	rq_dcp_ok "$w/ck" "$step" || return 1
	ref=$(sed -n 's/^done: .* sha256 //p' "$w/ref.out")
	got=$(sed -n 's/^done: .* sha256 //p' "$w/job.out")
	[ -n "$ref" ] && [ "$ref" = "$got" ] || fail "final parameters: sha256 $got, uninterrupted $ref" || return 1
	note "torch $("$PYENV" -c 'import torch; print(torch.__version__)'): stopped at $step, requeued, resumed; sha256 ${got:0:12}... == uninterrupted"
}

# rq_dcp_ok6 DIR STEP: rq_dcp_ok, and all 6 ranks wrote their .distcp file
rq_dcp_ok6() {
	local n
	rq_dcp_ok "$1" "$2" || return 1
	n=$(find "$1/$(printf 'step-%08d' "$2")" -name '*.distcp' | wc -l)
	[ "$n" = 6 ] || fail "$n .distcp files in step $2, want 6 (one per rank)" || return 1
}

# torch_requeue.py under a real time limit (rq_timelimit: sbatch --time=1
# --dpg-requeue=20 on the command line, far more steps than a minute
# allows): Slurm's own SIGUSR1, not the limit's SIGTERM; every rank logs
# "rank R: got ...|told by another rank: stopping at step N" with the same
# N, step-N is the DCP save latest names (6 .distcp files), requeued (Restarts=1), resumed at N.
c_requeue_torch_timelimit() {
	local w=$WORK/requeue-torch-tl n nr other
	PYTHON=$PYENV TRAIN=$E2E_SRCDIR/examples/torch_requeue.py rq_timelimit "$w" e2e-requeue-torch-tl \
		rq_dcp_ok6 torch-requeue.sbatch --steps 100000000 || return 1
	n=$(grep -Ec "^rank [0-5]: (got [A-Za-z0-9 ]+|told by another rank): stopping at step $RQ_STEP\$" "$w/run1.out")
	nr=$(grep -Eo '^rank [0-5]: .*: stopping at step ' "$w/run1.out" | cut -d: -f1 | sort -u | wc -l)
	[ "$n" = 6 ] && [ "$nr" = 6 ] || fail "$n lines of $nr ranks say 'stopping at step $RQ_STEP', want all 6" || return 1
	other=$(grep 'stopping at step' "$w/run1.out" | grep -v "stopping at step $RQ_STEP\$")
	[ -z "$other" ] || fail "ranks stopped at another step: $other" || return 1
	grep -q '^run 1 of job [0-9]*: from scratch$' "$w/job.out" && grep -q '^run 2 of job [0-9]*: --resume$' "$w/job.out" ||
		fail "no 'run 1 ... from scratch' and 'run 2 ... --resume' lines from the template" || return 1
	grep -q "^resumed from $w/ck/$(printf 'step-%08d' "$RQ_STEP") at step $RQ_STEP\$" "$w/job.out" ||
		fail "no 'resumed from $w/ck/step-N at step $RQ_STEP'" || return 1
	note "torch $("$PYENV" -c 'import torch; print(torch.__version__)'), job $RQ_J (--time=1, GRACE 20 s): Slurm's SIGUSR1 ($RQ_NSIG of 6 ranks logged it) stopped all 6 at step $RQ_STEP, $RQ_SECS s after sbatch; DCP save step-N, requeued (Restarts=1), resumed at $RQ_STEP"
}

# Signals at the wrong moment: during a save (twice) and during start-up
# (before dpg_init).  Both are 6-rank jobs under c-libdpg-requeue.sbatch with
# the arguments RQS_A; the uninterrupted reference runs once.
RQS_A=(--steps 200 --global-batch 48 --micro-batch 4 --log-every 25 --seed 7 --deterministic)

rq_short_ref() {
	RQS_REF=$WORK/requeue-short-ref.bin
	rq_reference "$RQS_REF" requeue-short-ref "${RQS_A[@]}"
}

# rq_steps_complete DIR LAST: DIR holds step-1 .. step-LAST (--save-every 1),
# each with its meta, and no step beyond LAST
rq_steps_complete() {
	local d=$1 last=$2 n bad
	n=$(find "$d" -mindepth 1 -maxdepth 1 -name 'step-*' | wc -l)
	[ "$n" = "$last" ] || fail "$n step directories, want $last (step-1 .. step-$last)" || return 1
	bad=$(for s in $(seq 1 "$last"); do [ -s "$(printf '%s/step-%08d/meta' "$d" "$s")" ] || echo "$s"; done | head -3)
	[ -z "$bad" ] || fail "step directories without meta: $bad" || return 1
}

# rq_finish JOB DIR STEP: release the requeued job; it resumes at STEP (world
# 6), finishes, and its final parameters equal the reference's
rq_finish() {
	local j=$1 w=$2 step=$3
	scontrol update JobId="$j" StartTime=now+3 || { fail "cannot release job $j"; return 1; }
	job_wait "$j" 200 || { scontrol show job "$j" | grep -E 'JobState|Restarts|ExitCode'
		show "$w/job.out"; return 1; }
	[ "$(rq_restarts "$j")" = 1 ] || fail "Restarts=$(rq_restarts "$j"), want 1" || return 1
	grep -q "^resumed from $w/ck at step $step (world 6)" "$w/job.out" ||
		fail "no 'resumed from $w/ck at step $step (world 6)'" || return 1
	grep -q '^done: steps 200 ' "$w/job.out" || fail "the resumed run did not finish" || return 1
	cmp "$RQS_REF" "$w/job.bin" || fail "final parameters differ from the uninterrupted run" || return 1
}

# rq_job_pids JOB: the pids of the job's train processes (this cluster's)
rq_job_pids() {
	local d e c
	for d in /proc/[0-9]*; do
		read -r c <"$d/comm" 2>/dev/null || continue
		case $c in train|lt-train) ;; *) continue;; esac
		e=$( (tr '\0' '\n' <"$d/environ") 2>/dev/null) || continue
		grep -qx "SLURM_JOB_ID=$1" <<<"$e" && grep -qx "SLURM_CONF=$SLURM_CONF" <<<"$e" && echo "${d#/proc/}"
	done
}

# rq_usr1_pending PID: SIGUSR1 (bit 9) is pending for the process or a thread
rq_usr1_pending() {
	local k v
	while read -r k v; do
		case $k in ShdPnd:|SigPnd:) (( (0x$v >> 9) & 1 )) && return 0;; esac
	done <"/proc/$1/status"
	return 1
}

# Two USR1 in quick succession that arrive during a save.  train saves every
# step (--save-every 1); once a rank has a shard of step N half-written (its
# .shard-R.tmp.* file exists) the case stops the job's 6 processes
# (SIGSTOP), checks that the file is still there (the save frozen midway),
# sends scancel --signal=USR1 twice, waits until SIGUSR1 is pending in all
# 6, and lets them go on (SIGCONT): the signals arrive in the middle of step
# N's save.  The save goes on and completes, the stop check after it ends
# the run: the job stops at step N exactly, saved once; step-1..N are
# complete, latest names N, nothing is left half-written; the requeued run
# resumes at N and ends with the uninterrupted run's parameters.
c_requeue_in_save() {
	local w=$WORK/requeue-save j cur next sd when= step nstop p n tries=0 pids=() hits=()
	rq_short_ref || return 1
	rm -rf "$w"
	mkdir -p "$w"
	echo "\$ CKPT=$w/ck sbatch -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 c-libdpg-requeue.sbatch train ${RQS_A[*]} --save-every 1"
	j=$(CKPT=$w/ck DPG_TIMEOUT=60 sbatch --parsable -N3 --ntasks-per-node=2 "${G[@]}" -o "$w/job.out" \
		-J e2e-requeue-save "$E2E_SRCDIR/etc/sbatch/c-libdpg-requeue.sbatch" \
		"$E2E_TRAIN" "${RQS_A[@]}" --save-every 1 --print-params "$w/job.bin" 2>&1) ||
		{ echo "$j"; fail "sbatch failed"; return 1; }
	echo "job $j"
	rq_wait_line "$w/job.out" '^step 25/' 120 || { show "$w/job.out"; fail "the job did not reach step 25"; return 1; }
	mapfile -t pids < <(rq_job_pids "$j")
	[ ${#pids[@]} = 6 ] || { fail "found ${#pids[@]} train processes of job $j, want 6: ${pids[*]}"; return 1; }
	echo "train processes: ${pids[*]}"
	shopt -s nullglob
	local deadline=$((SECONDS + 60))
	while [ $SECONDS -lt $deadline ] && [ $tries -lt 50 ]; do
		read -r cur <"$w/ck/latest" 2>/dev/null || cur=
		next=$(( 10#${cur#step-} + 1 ))
		printf -v sd '%s/ck/step-%08d' "$w" "$next"
		hits=("$sd"/.shard-*.tmp.*)
		if [ ${#hits[@]} -gt 0 ]; then
			kill -STOP "${pids[@]}"
			tries=$((tries + 1))
			hits=("$sd"/.shard-*.tmp.*)
			if [ ${#hits[@]} -gt 0 ] && [ ! -e "$sd/meta" ]; then
				when=$next
				break
			fi
			kill -CONT "${pids[@]}"	# (it finished meanwhile: again)
		fi
		sleep 0.005
	done
	shopt -u nullglob
	[ -n "$when" ] || { show "$w/job.out"; fail "never froze a save in progress ($tries tries)"; return 1; }
	echo "frozen (SIGSTOP) with ${hits[*]#"$w"/} half-written, after $tries tries"
	scancel --signal=USR1 "$j" && scancel --signal=USR1 "$j" ||
		{ kill -CONT "${pids[@]}"; fail "scancel --signal=USR1 failed"; return 1; }
	for p in "${pids[@]}"; do
		n=0
		until rq_usr1_pending "$p" || [ $n -ge 200 ]; do sleep 0.05; n=$((n + 1)); done
		rq_usr1_pending "$p" || { kill -CONT "${pids[@]}"; fail "SIGUSR1 not pending in $p after 10 s"; return 1; }
	done
	[ ! -e "$sd/meta" ] || { kill -CONT "${pids[@]}"; fail "step $when's meta appeared while frozen"; return 1; }
	kill -CONT "${pids[@]}"
	echo "2x USR1 pending in all 6 while step $when's save was frozen midway; SIGCONT"
	rq_wait_line "$w/job.out" '^stopped at step' 60 || { show "$w/job.out"; fail "no 'stopped at step' line"; return 1; }
	rq_requeued "$j" 60 || { show "$w/job.out"; return 1; }
	sed '/^requeueing job/q' "$w/job.out" | grep -v '^saved step' >"$w/run1.out"
	show "$w/run1.out" "first run (without its 'saved step' lines)"
	step=$(sed -n 's/^stopped at step \([0-9]*\):.*/\1/p' "$w/job.out")
	[ "$step" = "$when" ] || fail "stopped at step '$step', want $when (the save the signals arrived in)" || return 1
	[ "$(sed '/^requeueing job/q' "$w/job.out" | grep -c "^saved step $step ")" = 1 ] ||
		fail "step $step was not saved exactly once" || return 1
	nstop=$(grep -c 'got User defined signal 1: stopping at this step' "$w/run1.out")
	[ "$nstop" = 6 ] || fail "$nstop ranks logged 'got User defined signal 1', want all 6 (each had it pending)" || return 1
	rq_all_75 "$w/run1.out" || return 1
	rq_ckpt_ok "$w/ck" "$step" 6 || return 1
	rq_steps_complete "$w/ck" "$step" || return 1
	rq_finish "$j" "$w" "$step" || return 1
	note "job $j: 6 ranks frozen with step $when's save half-written, 2x USR1 pending in all, continued: all 6 logged it, stopped at step $when, saved once; step-1..$when complete, latest = step $when, no leftovers; resumed, params == uninterrupted"
}

# A warning during start-up: the tasks run a wrapper that prints whether
# SIGUSR1 is blocked and ignored (the plugin does both before exec), holds
# 8 s (a slow start: module loads, imports) and execs train; the case sends
# two USR1 while all 6 hold.  SHELL bash (the plugin's block survives it):
# the signals wait, pending, until dpg_init installs the handler; every rank
# logs it, the job stops at step 1 (saved), is requeued, resumes there and
# ends with the uninterrupted run's parameters.  SHELL sh (dash, which
# unblocks every signal for the commands it runs): the warning is dropped,
# not fatal; the job runs through without a requeue, to the same parameters.
c_requeue_at_start() {
	local shell=$1 w=$WORK/requeue-start-$1 j t0 t1 nstop n=0
	rq_short_ref || return 1
	rm -rf "$w"
	mkdir -p "$w"
	cat >"$w/slow-start" <<SLOW
#!/bin/$shell
# the first run holds before exec (SIGUSR1's bit is 1 << 9 of SigBlk, SigIgn)
if [ "\${SLURM_RESTART_COUNT:-0}" = 0 ]; then
	b=\$(awk '/^SigBlk:/ { print \$2 }' /proc/self/status)
	i=\$(awk '/^SigIgn:/ { print \$2 }' /proc/self/status)
	echo "starting rank \$SLURM_PROCID: SIGUSR1 blocked=\$(( (0x\$b >> 9) & 1 )) ignored=\$(( (0x\$i >> 9) & 1 ))"
	sleep 8
fi
exec "\$@"
SLOW
	chmod 755 "$w/slow-start"
	echo "--- $w/slow-start:"; cat "$w/slow-start"
	echo "\$ CKPT=$w/ck sbatch -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 c-libdpg-requeue.sbatch slow-start train ${RQS_A[*]}"
	j=$(CKPT=$w/ck DPG_TIMEOUT=60 sbatch --parsable -N3 --ntasks-per-node=2 "${G[@]}" -o "$w/job.out" \
		-J e2e-requeue-start "$E2E_SRCDIR/etc/sbatch/c-libdpg-requeue.sbatch" \
		"$w/slow-start" "$E2E_TRAIN" "${RQS_A[@]}" --print-params "$w/job.bin" 2>&1) ||
		{ echo "$j"; fail "sbatch failed"; return 1; }
	echo "job $j"
	rq_wait_line "$w/job.out" '^starting rank' 120 || { show "$w/job.out"; fail "no task started"; return 1; }
	t0=$(e2e_now)
	while [ $n -lt 100 ] && [ "$(grep -c '^starting rank' "$w/job.out")" -lt 6 ]; do sleep 0.05; n=$((n + 1)); done
	scancel --signal=USR1 "$j" && scancel --signal=USR1 "$j" || { fail "scancel --signal=USR1 failed"; return 1; }
	t1=$(e2e_now)
	[ "$(grep -c '^starting rank [0-5]: SIGUSR1 blocked=1 ignored=1$' "$w/job.out")" = 6 ] ||
		{ show "$w/job.out"; fail "want 6 'starting rank R: SIGUSR1 blocked=1 ignored=1' lines (the plugin's doing)"; return 1; }
	# (the first task to print holds until 8 s after it: the signals came
	# before any task reached train, let alone dpg_init)
	awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 6) }' ||
		fail "the signals went out $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s after the first task started: too late to be before dpg_init" || return 1
	if [ "$shell" = sh ]; then
		job_wait "$j" 200 || { show "$w/job.out"; return 1; }
		show "$w/job.out" "job output"
		! grep -q 'User defined signal 1' "$w/job.out" || fail "a task saw or died of SIGUSR1 behind dash" || return 1
		! grep -q '^requeueing' "$w/job.out" || fail "requeued" || return 1
		[ "$(rq_restarts "$j")" = 0 ] || fail "Restarts=$(rq_restarts "$j"), want 0" || return 1
		grep -q '^done: steps 200 ' "$w/job.out" || fail "the run did not finish" || return 1
		cmp "$RQS_REF" "$w/job.bin" || fail "final parameters differ from the uninterrupted run" || return 1
		note "job $j: 2x USR1 $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s after the first task started, behind a /bin/sh (dash) wrapper: dropped (ignored), not fatal; the job ran through, params == uninterrupted"
		return 0
	fi
	rq_wait_line "$w/job.out" '^stopped at step' 90 || { show "$w/job.out"; fail "no 'stopped at step' line"; return 1; }
	rq_requeued "$j" 60 || { show "$w/job.out"; return 1; }
	sed '/^requeueing job/q' "$w/job.out" >"$w/run1.out"
	show "$w/run1.out" "first run"
	grep -q '^stopped at step 1: exit 75' "$w/run1.out" || fail "did not stop at step 1" || return 1
	grep -q '^saved step 1 ' "$w/run1.out" || fail "step 1 was not saved" || return 1
	nstop=$(grep -c 'got User defined signal 1: stopping at this step' "$w/run1.out")
	[ "$nstop" = 6 ] || fail "$nstop ranks logged 'got User defined signal 1', want all 6 (each had it pending)" || return 1
	rq_all_75 "$w/run1.out" || return 1
	rq_ckpt_ok "$w/ck" 1 6 || return 1
	[ "$(find "$w/ck" -mindepth 1 -maxdepth 1 -name 'step-*' | wc -l)" = 1 ] ||
		fail "more than step-1 in $w/ck: $(ls "$w/ck")" || return 1
	rq_finish "$j" "$w" 1 || return 1
	note "job $j: 2x USR1 $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s after the first task started (all 6 held it, before exec of train): all 6 ranks logged it at the first stop check after dpg_init, stopped at step 1, saved, requeued, resumed, params == uninterrupted"
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

# run by run.sh once the allocation ALLOC is gone (an urgent job would preempt it)
requeue_preempt_cases() {
	[ -n "$E2E_TRAIN" ] || { skip_case "requeue: preemption" "no examples/train"; return 0; }
	pcase "requeue: preemption (partition_prio, PreemptMode=REQUEUE, GraceTime=60): a -p urgent --exclusive job preempts the 6-rank job: SIGTERM, all save one step, exit 75, the script requeues (Restarts=1), urgent runs, job resumes, params == uninterrupted" \
		c_requeue_preempt requeue
	pcase "requeue: preemption with PreemptMode=CANCEL + preempt_send_user_signal: SIGUSR1, saved, the script requeues before the grace ends (not cancelled, Restarts=1), resumed, params == uninterrupted" \
		c_requeue_preempt_cancel
	pcase "requeue: preemption, a save longer than GraceTime=5, PreemptMode=REQUEUE: 2nd SIGTERM 5-40 s later kills the batch script; slurmctld requeues the job itself, once (Restarts=1)" \
		c_requeue_preempt_overrun requeue
	pcase "requeue: preemption, a save longer than GraceTime=5, PreemptMode=CANCEL: the job ends PREEMPTED, not requeued (Restarts=0)" \
		c_requeue_preempt_overrun cancel
}

requeue_cases() {
	[ -n "$E2E_TRAIN" ] || { skip_case "requeue" "no examples/train"; return 0; }
	pcase "requeue: plugstack requeue=45 is the default (SBATCH_SIGNAL=USR1@45, DPG_REQUEUE=45); --dpg-requeue=0 turns it off" \
		c_requeue_default
	pcase "requeue: 6-rank sbatch job, scancel --signal=USR1 mid-run: all save one step, exit 75, requeued (Restarts=1), resumed, params == uninterrupted" \
		c_requeue_signal
	pcase "requeue: sbatch --time=1 --dpg-requeue=20 (command line): Slurm's own warning stops all 6 ranks before the limit, saved, requeued, resumed" \
		c_requeue_timelimit
	pcase "requeue: 2x USR1 arriving mid-save (6 ranks frozen with a shard half-written, --save-every 1): stop at that step, every saved step complete, no leftovers; resumed, params == uninterrupted" \
		c_requeue_in_save
	pcase "requeue: 2x USR1 during start-up (bash wrapper holds before exec; plugin keeps USR1 blocked): all 6 log it after dpg_init, stop at step 1, resumed, params == uninterrupted" \
		c_requeue_at_start bash
	pcase "requeue: 2x USR1 during start-up behind a /bin/sh (dash) wrapper, which unblocks signals: dropped, not fatal; runs through, params == uninterrupted" \
		c_requeue_at_start sh
	if [ -n "$PYENV" ] && "$PYENV" -c 'import torch.distributed.checkpoint' 2>/dev/null; then
		pcase "requeue: torch-requeue.sbatch, torch_requeue.py (DDP gloo, DCP) 6 ranks, USR1 mid-run: step-N renamed, latest flipped, requeued, resumed, params == uninterrupted" \
			c_requeue_torch
		pcase "requeue: torch-requeue.sbatch under sbatch --time=1 --dpg-requeue=20 (command line): Slurm's own SIGUSR1 stops all 6 torch ranks at one step before the limit, DCP-saved, requeued (Restarts=1), resumed" \
			c_requeue_torch_timelimit
	else
		skip_case "requeue: torch_requeue.py" "no DPG_PYENV python with torch.distributed.checkpoint"
	fi
}
