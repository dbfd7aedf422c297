# SPDX-License-Identifier: BSD-3-Clause
# longjobs.sh - the e2e cases of "long jobs that survive" (sourced by run.sh,
# which runs them in the step allocation): fast fail.  A rank of a 6-rank
# step (-N3 --ntasks-per-node=2) is SIGKILLed while the other five compute
# (sleep FF_HOLD s, outside any collective, so only srun can end them early):
# with kill-on-fail (the default) srun must return non-zero within FF_MAX s
# of the kill, its first task line naming the rank and node; with
# --dpg-kill-on-fail=no (or kill_on_fail=no in plugstack.conf) the survivors
# must run on until they wake and fail themselves.  Both for a PyTorch gloo
# job (no libdpg inside: tests/e2e/ff_victim.py) and a C libdpg job
# (coll_victim with DPG_E2E_HOLD_S).  And what is left after a batch job
# failed so: its output, scontrol, sacct (no slurmdbd) and sacct -c.

FF_HOLD=${FF_HOLD:-12}	# seconds the survivors compute after the kill
FF_MAX=${FF_MAX:-5}	# the bound: srun returns within FF_MAX s of the kill
FF_RUNS=${FF_RUNS:-3}	# runs per fast case (every one must meet the bound)

# ff_run TAG KIND [SRUN-ARGS...]: rank 3 of a KIND (torch|c) job dies; sets
# FF_RC (srun's exit status), FF_TOOK (s from the kill to srun's return),
# FF_OUT and FF_ERR (the step's stdout and stderr)
ff_run() {
	local tag=$1 kind=$2 death t_end prog=()
	shift 2
	death=$WORK/ff-$tag.death FF_OUT=$WORK/ff-$tag.out FF_ERR=$WORK/ff-$tag.err
	rm -f "$death"
	case $kind in
	torch) prog=("$PYENV" "$E2E_DIR/ff_victim.py" 3 "$FF_HOLD" "$death");;
	c) prog=(env DPG_TIMEOUT=60 DPG_E2E_VICTIM=3 DPG_E2E_KILL_AT=3 DPG_E2E_COUNT=4096
		DPG_E2E_HOLD_S="$FF_HOLD" DPG_E2E_DEATH="$death" "$E2E_VICTIM");;
	esac
	echo "\$ srun -N3 --ntasks-per-node=2 --dpg-gpus-per-task=0 $* ${prog[*]##*/}"
	timeout 90 srun "${INALLOC[@]}" -N3 --ntasks-per-node=2 "${G[@]}" "$@" "${prog[@]}" \
		>"$FF_OUT" 2>"$FF_ERR"; FF_RC=$?
	t_end=$(e2e_now)
	show "$FF_OUT" stdout
	show "$FF_ERR" stderr
	[ $FF_RC != 124 ] || fail "srun killed by 'timeout 90': the step hung" || return 1
	[ -s "$death" ] || fail "rank 3 did not record its death" || return 1
	FF_TOOK=$(awk -v a="$(cat "$death")" -v b="$t_end" 'BEGIN { printf "%.2f", b - a }')
	echo "srun exited $FF_RC, ${FF_TOOK}s after rank 3 was killed"
}

# the first line of srun's that reports a task's end
ff_first_line() { grep -m1 -E '^srun: error: [^ ]+: tasks? [0-9,-]+: ' "$FF_ERR"; }

c_ff_fast() { # KIND: kill-on-fail (default): every run ends <= FF_MAX s after the kill
	local kind=$1 r times= first
	for r in $(seq "$FF_RUNS"); do
		ff_run "fast-$kind-$r" "$kind" || return 1
		[ "$FF_RC" != 0 ] || fail "srun exited 0 although rank 3 was killed" || return 1
		awk -v t="$FF_TOOK" -v m="$FF_MAX" 'BEGIN { exit !(t >= 0 && t <= m) }' ||
			fail "srun returned ${FF_TOOK}s after the kill (bound ${FF_MAX}s)" || return 1
		first=$(ff_first_line)
		[ "$first" = "srun: error: n2: task 3: Killed" ] ||
			fail "srun's first task line is '$first', want 'srun: error: n2: task 3: Killed'" ||
			return 1
		[ "$(grep -c 'HOLD rank' "$FF_OUT")" = 5 ] ||
			fail "want 5 survivors computing when rank 3 died" || return 1
		! grep -q 'HELD rank' "$FF_OUT" || fail "a survivor ran on after the kill" || return 1
		times="$times ${FF_TOOK}s"
	done
	note "$FF_RUNS runs: srun exit $FF_RC,$times after kill -9 of rank 3 (bound ${FF_MAX}s); first line '$first'"
}

c_ff_off() { # KIND TAG [SRUN-ARGS...]: no fast fail: the survivors run on
	local kind=$1 tag=$2
	shift 2
	ff_run "$tag-$kind" "$kind" "$@" || return 1
	[ "$FF_RC" != 0 ] || fail "srun exited 0 although rank 3 was killed" || return 1
	[ "$(grep -c 'HELD rank' "$FF_OUT")" = 5 ] ||
		fail "want all 5 survivors to wake up after ${FF_HOLD}s (nothing killed them)" || return 1
	awk -v t="$FF_TOOK" -v h="$FF_HOLD" 'BEGIN { exit !(t >= h) }' ||
		fail "srun returned ${FF_TOOK}s after the kill, before the survivors' ${FF_HOLD}s" || return 1
	note "srun exit $FF_RC ${FF_TOOK}s after the kill: the 5 survivors computed ${FF_HOLD}s, then failed themselves"
}

c_ff_admin_off() { # kill_on_fail=no in plugstack.conf; the user's =yes still wins
	plugstack "optional $PLUGIN_SO kill_on_fail=no"
	c_ff_off c admin-off || { plugstack_restore; return 1; }
	local off=$FF_TOOK
	ff_run admin-off-yes c --dpg-kill-on-fail=yes || { plugstack_restore; return 1; }
	plugstack_restore
	awk -v t="$FF_TOOK" -v m="$FF_MAX" 'BEGIN { exit !(t <= m) }' ||
		fail "--dpg-kill-on-fail=yes under kill_on_fail=no: ${FF_TOOK}s" || return 1
	note "kill_on_fail=no: ${off}s; with --dpg-kill-on-fail=yes: ${FF_TOOK}s"
}

c_ff_abbrev() { # an abbreviated option srun accepts but the plugin saw too late: said
	local out rc
	out=$(srun "${INALLOC[@]}" -N1 -n1 "${G[@]}" --dpg-kill-on=no echo TASK-RAN 2>&1); rc=$?
	echo "\$ srun -N1 -n1 --dpg-gpus-per-task=0 --dpg-kill-on=no echo TASK-RAN -> exit $rc"
	echo "$out"
	[ $rc = 0 ] && grep -q TASK-RAN <<<"$out" || fail "the step did not run" || return 1
	! grep -q 'no job secret' <<<"$out" || fail "the step lost its contract" || return 1
	grep -q 'dpg: kill-on-fail stays on for this step: .* pass -K0 to srun' <<<"$out" ||
		fail "no 'dpg: kill-on-fail stays on' warning" || return 1
	note "$(grep -m1 'dpg: ' <<<"$out" | cut -c1-120)"
}

# What a user has after the job: a batch job whose srun step loses rank 3
# (kill -9; the survivors would hold FF_HOLD s).  The job's output keeps
# srun's line naming the rank and node; scontrol shows the job FAILED with
# srun's exit code.  sacct: the minicluster has no slurmdbd (Slurm 22.05's
# only accounting storage besides none), so plain sacct says that storage
# is disabled; with JobCompType=jobcomp/filetxt "sacct -c" shows the job's
# completion record (State, ExitCode, the job's NodeList): a job record, no
# step and no rank in it (with slurmdbd a step's record has the step's nodes
# and the largest exit code, not the first rank to fail either).
c_ff_batch() {
	local w=$WORK/ff-batch j st n=0 first ec acct rc comp
	rm -rf "$w"
	mkdir -p "$w"
	j=$(sbatch --parsable -N3 --ntasks-per-node=2 -o "$w/job.out" -J e2e-ff-batch --wrap \
		"srun --dpg-gpus-per-task=0 env DPG_TIMEOUT=60 DPG_E2E_VICTIM=3 DPG_E2E_KILL_AT=3 DPG_E2E_COUNT=4096 DPG_E2E_HOLD_S=$FF_HOLD DPG_E2E_DEATH=$w/death $E2E_VICTIM" 2>&1) ||
		{ echo "$j"; fail "sbatch failed"; return 1; }
	echo "\$ sbatch -N3 --ntasks-per-node=2 --wrap 'srun --dpg-gpus-per-task=0 ... coll_victim'   -> job $j"
	while [ $n -lt 900 ]; do
		st=$(job_state "$j")
		case $st in PENDING|CONFIGURING|RUNNING|COMPLETING|'') sleep 0.1;; *) break;; esac
		n=$((n + 1))
	done
	show "$w/job.out" "job output"
	[ "$st" = FAILED ] || fail "job $j ended '$st', want FAILED" || return 1
	first=$(grep -m1 -E '^srun: error: [^ ]+: tasks? [0-9,-]+: ' "$w/job.out")
	[ "$first" = "srun: error: n2: task 3: Killed" ] ||
		fail "the job output's first task line is '$first', want 'srun: error: n2: task 3: Killed'" || return 1
	ec=$(scontrol show job "$j" | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2)
	echo "scontrol show job $j: JobState=$st ExitCode=$ec"
	[ -n "$ec" ] && [ "$ec" != 0:0 ] || fail "scontrol: ExitCode '$ec'" || return 1
	acct=$(sacct -j "$j" --format=JobID,State,ExitCode,NodeList 2>&1); rc=$?
	echo "\$ sacct -j $j --format=JobID,State,ExitCode,NodeList  -> exit $rc"
	echo "$acct"
	grep -q 'accounting storage is disabled' <<<"$acct" ||
		fail "sacct without slurmdbd: want 'accounting storage is disabled'" || return 1
	n=0	# (slurmctld writes the record once the job is gone)
	while [ $n -lt 50 ]; do
		comp=$(sacct -c -j "$j" -n -P --format=JobID,State,ExitCode,NodeList 2>&1) && grep -q "^$j|" <<<"$comp" && break
		sleep 0.1
		n=$((n + 1))
	done
	echo "\$ sacct -c -j $j -n -P --format=JobID,State,ExitCode,NodeList"
	echo "$comp"
	grep -qx "$j|FAILED|$ec|n\[1-3\]" <<<"$comp" ||
		fail "sacct -c: want '$j|FAILED|$ec|n[1-3]'" || return 1
	note "job output: '$first'; scontrol ExitCode=$ec; sacct: storage disabled; sacct -c: '$(head -1 <<<"$comp")' (the job, not the rank)"
}

longjobs_cases() {
	[ $HAVE_PLUGIN = 1 ] || return 0
	pcase "srun rejects --dpg-kill-on-fail=maybe" c_bad_option srun --dpg-kill-on-fail=maybe
	if [ -n "$PYENV" ] && [ -x "$PYENV" ]; then
		pcase "fast fail: torch gloo -N3 x2, kill -9 rank 3: srun ends <= ${FF_MAX}s, names 'n2: task 3'" \
			c_ff_fast torch
		pcase "fast fail: torch gloo --dpg-kill-on-fail=no: the survivors run on" \
			c_ff_off torch no --dpg-kill-on-fail=no
	else
		skip_case "fast fail: torch gloo" "no DPG_PYENV python (scripts/pyenv.sh)"
	fi
	if [ -n "$E2E_VICTIM" ]; then
		pcase "fast fail: libdpg coll_victim -N3 x2, kill -9 rank 3: srun ends <= ${FF_MAX}s, names 'n2: task 3'" \
			c_ff_fast c
		pcase "fast fail: libdpg --dpg-kill-on-fail=no: the survivors run on" \
			c_ff_off c no --dpg-kill-on-fail=no
		pcase "fast fail: libdpg srun -K0 (srun's own option) wins over the default" \
			c_ff_off c K0 -K0
		pcase "fast fail: plugstack kill_on_fail=no turns it off; --dpg-kill-on-fail=yes back on" \
			c_ff_admin_off
		pcase "fast fail in a batch job: its output names 'n2: task 3'; scontrol FAILED; sacct: no storage, sacct -c: the job's record" \
			c_ff_batch
	fi
	pcase "fast fail: --dpg-kill-on=no (abbreviated, seen too late): srun warns that it stays on" c_ff_abbrev
	pcase "fast fail: no node drained or down" c_no_drain
}
