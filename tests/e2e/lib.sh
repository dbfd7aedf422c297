# SPDX-License-Identifier: BSD-3-Clause
# lib.sh - helpers for tests/e2e/run.sh and bench/ (sourced, bash).
# Needs: E2E_DIR (this directory), LAB (the minicluster dir, after start),
# WORK (scratch dir for outputs).

E2E_PASS=0
E2E_FAIL=0
E2E_SKIP=0
E2E_FAILED=

e2e_now() { echo "${EPOCHREALTIME/,/.}"; }
# e2e_python P: the python P names (the program, or a venv's directory:
# its bin/python) on stdout; fails where P is neither
e2e_python() {
	local p=$1
	if [ -d "$p" ] && [ -x "$p/bin/python" ]; then p=$p/bin/python; fi
	[ -f "$p" ] && [ -x "$p" ] && echo "$p"
}
e2e_elapsed() { awk -v a="$1" -v b="$(e2e_now)" 'BEGIN { printf "%.1f", b - a }'; }

# run_case NAME CMD [ARGS...]: run one named check, its output into
# $WORK/log/NAME.log; print "ok NAME (x.xs)" or "FAIL NAME" + the output.
# Cases are skipped unless NAME matches the CASES regex (default: all).
run_case() {
	local name=$1 t0 rc log
	shift
	if [ -n "${CASES:-}" ] && ! [[ $name =~ $CASES ]]; then return 0; fi
	log=$WORK/log/$(tr -c 'A-Za-z0-9._-' '_' <<<"$name").log
	t0=$(e2e_now)
	( set +e; "$@" ) >"$log" 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		E2E_PASS=$((E2E_PASS + 1))
		local note
		note=$(sed -n 's/^NOTE: //p' "$log" | head -3 | tr '\n' ' ')
		echo "ok $name ($(e2e_elapsed "$t0")s)${note:+  # ${note% }}"
	else
		E2E_FAIL=$((E2E_FAIL + 1))
		E2E_FAILED="$E2E_FAILED
  $name"
		echo "FAIL $name ($(e2e_elapsed "$t0")s, rc=$rc)"
		sed -e 's/^/    | /' "$log" | tail -n "${E2E_LOG_LINES:-40}"
	fi
}

# xfail_case NAME REASON CMD [ARGS...]: a case that checks the RIGHT
# behaviour of a known, reported plugin bug: while it fails it prints
# "XFAIL NAME  # known plugin bug: REASON" and the first lines of its output,
# and counts neither as passed nor failed (E2E_XFAIL); once the bug is fixed
# it prints "XPASS NAME" and counts as passed (then drop the marker).
E2E_XFAIL=0
xfail_case() {
	local name=$1 reason=$2 t0 rc log
	shift 2
	if [ -n "${CASES:-}" ] && ! [[ $name =~ $CASES ]]; then return 0; fi
	log=$WORK/log/$(tr -c 'A-Za-z0-9._-' '_' <<<"$name").log
	t0=$(e2e_now)
	( set +e; "$@" ) >"$log" 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		E2E_PASS=$((E2E_PASS + 1))
		echo "XPASS $name ($(e2e_elapsed "$t0")s)  # was a known bug ($reason): fixed? drop xfail_case"
	else
		E2E_XFAIL=$((E2E_XFAIL + 1))
		echo "XFAIL $name ($(e2e_elapsed "$t0")s)  # known plugin bug: $reason"
		sed -e 's/^/    | /' "$log" | head -n "${E2E_XFAIL_LINES:-6}"
	fi
}

# note TEXT: a remark shown after "ok NAME" (what the case observed)
note() { echo "NOTE: $*"; }

# skip_case NAME REASON: a case that cannot run here, counted and printed
# with its reason (the summary line says how many)
skip_case() {
	if [ -n "${CASES:-}" ] && ! [[ $1 =~ $CASES ]]; then return 0; fi
	E2E_SKIP=$((E2E_SKIP + 1))
	echo "SKIP $1  # $2"
}

# fail TEXT: print and return 1 (use as "cond || fail ...")
fail() { echo "error: $*"; return 1; }

# show FILE [LABEL]: print a file into the case log (for diagnostics)
show() { echo "--- ${2:-$1}:"; sed -n '1,60p' "$1" 2>/dev/null; }

# job_state JOBID -> PENDING, RUNNING, COMPLETED, FAILED, ...
job_state() {
	local st
	st=$(scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -1)
	st=${st#JobState=}
	# a finished job slurmctld has forgotten (MinJobAge): the job
	# completion log's record (minicluster.sh: jobcomp/filetxt)
	[ -n "$st" ] || st=$(sacct -c -j "$1" -n -P --format=State 2>/dev/null | head -1)
	echo "$st"
}

# job_wait JOBID [TIMEOUT_S]: poll (every 0.1 s; sbatch --wait polls every
# ~10 s) until the job ends; succeed only if it COMPLETED.
job_wait() {
	local j=$1 n=$(( ${2:-60} * 10 )) st
	while [ $n -gt 0 ]; do
		st=$(job_state "$j")
		case $st in
		COMPLETED) return 0;;
		PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|'') sleep 0.1;;
		*) echo "job $j ended $st"; return 1;;
		esac
		n=$((n - 1))
	done
	echo "job $j still $st after ${2:-60}s"
	return 1
}

# next_job_id: the id the next job gets (creates a held job and cancels it)
next_job_id() {
	local j
	j=$(sbatch --parsable --hold -J e2e-probe -o /dev/null --wrap true 2>&1) ||
		{ echo "probe sbatch failed: $j" >&2; return 1; }
	scancel "$j" 2>/dev/null
	echo "$j"
}

# plugstack LINE...: rewrite the cluster's plugstack.conf (srun and
# slurmstepd re-read it at every launch); plugstack_restore puts the
# original back.
plugstack() {
	[ -f "$LAB/plugstack.conf.orig" ] || cp "$LAB/plugstack.conf" "$LAB/plugstack.conf.orig"
	printf '%s\n' "$@" >"$LAB/plugstack.conf.new"
	mv "$LAB/plugstack.conf.new" "$LAB/plugstack.conf"
}
plugstack_restore() {
	[ -f "$LAB/plugstack.conf.orig" ] && cp "$LAB/plugstack.conf.orig" "$LAB/plugstack.conf"
	return 0
}

# e2e_pick_ports: choose free CTLD_PORT / SLURMD_PORT (and, with NETNS=1, a
# free NETNS_NET) unless the caller set them, so that a second cluster (a
# parallel run, another developer's) does not collide; exports them.
e2e_pick_ports() {
	local busy k0 i k c d x
	busy=$(for f in /proc/net/tcp /proc/net/tcp6; do
		[ -r $f ] && awk 'NR > 1 && $4 == "0A" { n = split($2, a, ":"); print a[n] }' $f
	done | while read -r h; do echo $((16#$h)); done | sort -u)
	if [ -z "${CTLD_PORT:-}" ] || [ -z "${SLURMD_PORT:-}" ]; then
		k0=$((RANDOM % 200))
		for i in $(seq 0 199); do
			k=$(( (k0 + i) % 200 ))
			c=$((6817 + 10 * k)); d=$((17001 + 10 * k))
			grep -qxE "$c|$d|$((d + 1))|$((d + 2))|$((d + 3))|$((d + 4))" <<<"$busy" && continue
			CTLD_PORT=${CTLD_PORT:-$c}; SLURMD_PORT=${SLURMD_PORT:-$d}
			break
		done
	fi
	export CTLD_PORT SLURMD_PORT
	if [ "${NETNS:-0}" = 1 ] && [ -z "${NETNS_NET:-}" ]; then
		for x in $(seq 250 -1 200); do
			grep -q " 10.$x.0.1/" <<<"$(ip -4 -o addr show 2>/dev/null)" || { NETNS_NET=10.$x.0; break; }
		done
		export NETNS_NET
	fi
}

# c_no_drain: a case: no node is drained or down (after the cases before it)
c_no_drain() {
	local states
	states=$(sinfo -h -o '%T %N' | tr '\n' ' ')
	echo "sinfo: $states"
	! grep -qiE 'drain|down|fail|not_resp' <<<"$states" || fail "nodes are: $states" || return 1
	note "$states"
}
