# SPDX-License-Identifier: BSD-3-Clause
# check.sh - the e2e cases of dpg-check: a healthy cluster exits 0 with one
# "ok" row per node; deliberately broken nodes are reported, exactly those,
# with the right reason: a small /dev/shm (a tmpfs mounted in that node's
# own mount namespace, NETNS=1), a low open-files limit (prlimit on that
# node's slurmd, the step run with --propagate=NONE so that the tasks get
# the node's limits, as with PropagateResourceLimits=NONE), MASTER_PORT
# held by another process on a node, and a node whose tasks never start the
# check (named by rank 0 within DPG_TIMEOUT).  Also the straggler line
# (DPG_REPORT) and the hang report of examples/train with a slowed or a
# stopped rank.  Sourced by run.sh; E2E_CHECK is the dpg-check to run.

CKG=(-N3 --ntasks-per-node=2 --dpg-gpus-per-task=0)
CK_PRE=()   # what runs dpg-check (a wrapper), before its path

slurmd_pid() { awk -v n="slurmd-$1" '$2 == n { print $1 }' "$LAB/pids"; }

# check_run OUT SRUN-ARGS... -- DPG_TIMEOUT: run dpg-check as a step; its
# rc in $CK_RC, its wall time in $CK_S
check_run() {
	local out=$1 to t0
	shift
	to=${CK_TIMEOUT:-20}
	echo "\$ DPG_TIMEOUT=$to srun $* dpg-check ${CK_ARGS:-}"
	t0=$(e2e_now)
	timeout 120 srun "${INALLOC[@]}" "$@" env DPG_TIMEOUT="$to" "${CK_PRE[@]}" \
		"$E2E_CHECK" ${CK_ARGS:-} >"$out" 2>"$out.err"; CK_RC=$?
	CK_S=$(e2e_elapsed "$t0")
	echo "(exit $CK_RC after ${CK_S}s)"
	cat "$out"
	[ -s "$out.err" ] && show "$out.err" stderr
	return 0
}

# check_rows OUT WANT: the RESULT column by node, "n1=ok n2=FAIL n3=ok"
check_rows() {
	local got
	got=$(awk '$1 ~ /^n[0-9]+$/ && NF > 3 { printf "%s%s=%s", sep, $1, $NF; sep = " " }' "$1")
	[ "$got" = "$2" ] || fail "rows: want '$2', got '$got'"
}

c_check_ok() {
	local out=$WORK/check-ok.out
	check_run "$out" "${CKG[@]}"
	[ "$CK_RC" = 0 ] || fail "dpg-check exited $CK_RC on a healthy cluster" || return 1
	check_rows "$out" "n1=ok n2=ok n3=ok" || return 1
	grep -q '^dpg-check: 3 of 3 nodes fit$' "$out" || fail "no '3 of 3 nodes fit'" || return 1
	CK_ARGS=--json check_run "$out.json" "${CKG[@]}"
	[ "$CK_RC" = 0 ] || fail "dpg-check --json exited $CK_RC" || return 1
	"$PY" - "$out.json" <<'PYEOF' || return 1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["fit"] is True and [n["node"] for n in d["nodes"]] == ["n1", "n2", "n3"], d
for n in d["nodes"][1:]:
    assert n["checks"]["net"]["state"] == "ok" and "GB/s" in n["checks"]["net"]["value"], n
# no GPU in the plan (--dpg-gpus-per-task=0): NCCL not measured, and why
for n in d["nodes"]:
    assert n["checks"]["nccl"] == {"state": "n/a", "value": "no GPU planned", "detail": ""}, n
print("json: fit, net " + ", ".join(n["node"] + " " + n["checks"]["net"]["value"] for n in d["nodes"][1:]))
PYEOF
	grep -q '^n2 .* [0-9.]*GB/s [0-9]*us *no GPU planned *ok$' "$out" ||
		fail "n2's row has no 'GB/s us' NET cell and 'no GPU planned' NCCL cell" || return 1
}

# check_json OUT NODE COLUMN PATTERN: the --json document of a step with NODE
# broken: not fit; NODE not fit, its COLUMN "fail" with a detail matching
# PATTERN; no other failing cell, every other node fit
check_json() {
	[ "$CK_RC" != 0 ] || fail "dpg-check --json exited 0 with $2 broken" || return 1
	"$PY" - "$@" <<'PYEOF'
import json, re, sys
path, node, col, pat = sys.argv[1:5]
d = json.load(open(path))
assert d["fit"] is False, "document fit with %s broken" % node
fails = [(n["node"], c) for n in d["nodes"] for c, x in n["checks"].items() if x["state"] == "fail"]
assert fails == [(node, col)], "failing cells %s, want only %s %s" % (fails, node, col)
for n in d["nodes"]:
    assert n["fit"] is (n["node"] != node), "%s: fit %s" % (n["node"], n["fit"])
x = [n for n in d["nodes"] if n["node"] == node][0]["checks"][col]
assert re.search(pat, x["detail"]), "%s %s detail %r does not match %r" % (node, col, x["detail"], pat)
print("json: fit false; %s %s fail (%s): %s" % (node, col, x["value"], x["detail"][:100]))
PYEOF
}

# check_broken OUT NODE COLUMN WANT-ROWS PATTERN: exactly one failing cell,
# NODE's COLUMN, its note matching PATTERN
check_broken() {
	local out=$1 node=$2 col=$3 rows=$4 pat=$5
	[ "$CK_RC" != 0 ] || fail "dpg-check exited 0 with $node broken" || return 1
	check_rows "$out" "$rows" || return 1
	grep -q "^\[1\] $node $col: .*$pat" "$out" || fail "no note '[1] $node $col: ...$pat'" || return 1
	[ "$(grep -c '^\[[0-9]*\] ' "$out")" = 1 ] || fail "more than one failing cell" || return 1
	note "$(grep -m1 "^\[1\] " "$out" | cut -c1-150)"
}

c_check_nofile() {
	local out=$WORK/check-nofile.out pid old rc
	pid=$(slurmd_pid n3)
	# the soft limit only: raising a hard limit back needs CAP_SYS_RESOURCE
	old=$(prlimit --pid "$pid" --nofile --noheadings -o SOFT | tr -d ' ')
	prlimit --pid "$pid" --nofile=80: || fail "prlimit on n3's slurmd failed" || return 1
	check_run "$out" --propagate=NONE "${CKG[@]}"
	CK_ARGS=--json check_run "$out.json" --propagate=NONE "${CKG[@]}"
	rc=$CK_RC
	prlimit --pid "$pid" --nofile="$old": || fail "cannot restore n3's slurmd limit" || return 1
	CK_RC=$rc check_json "$out.json" n3 nofile "^rank [45]: open-files limit 80 is below the 90" ||
		return 1
	check_broken "$out" n3 nofile "n1=ok n2=ok n3=FAIL" "open-files limit 80 is below the 90"
}

c_check_shm() {
	local out=$WORK/check-shm.out pid
	pid=$(slurmd_pid n2)
	nsenter -t "$pid" -m mount -t tmpfs -o size=1m dpgcheck /dev/shm ||
		fail "cannot mount a small /dev/shm in n2's mount namespace" || return 1
	check_run "$out" "${CKG[@]}"
	CK_ARGS=--json check_run "$out.json" "${CKG[@]}"
	rc=$CK_RC
	nsenter -t "$pid" -m umount /dev/shm
	CK_RC=$rc check_json "$out.json" n2 shm "the node segment of 2 tasks needs 9216 KiB" ||
		return 1
	check_broken "$out" n2 shm "n1=ok n2=FAIL n3=ok" "the node segment of 2 tasks needs 9216 KiB"
}

# hold_port NODE: a listener on a free port of NODE's network namespace
# (the host's without NETNS=1); the port in HOLD_PORT, its pid in HOLD_PID
hold_port() {
	local pid f=$WORK/hold-$1.port
	pid=$(slurmd_pid "$1")
	: >"$f"
	nsenter -t "$pid" -n "$PY" -c 'import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(120)' >"$f" &
	HOLD_PID=$!
	for _ in $(seq 50); do
		HOLD_PORT=$(cat "$f")
		[ -n "$HOLD_PORT" ] && nsenter -t "$pid" -n ss -Hltn "sport = :$HOLD_PORT" | grep -q . &&
			return 0
		sleep 0.1
	done
	fail "the listener on $1 did not start"
}

c_check_port() { # NODE ROWS
	local out=$WORK/check-port-$1.out port
	hold_port "$1" || return 1
	port=$HOLD_PORT
	CK_TIMEOUT=10 check_run "$out" "${CKG[@]}" --dpg-port="$port"
	kill "$HOLD_PID"; wait "$HOLD_PID" 2>/dev/null
	check_broken "$out" "$1" port "$2" "$port.*ss -ltnp" || return 1
	if [ "$1" = n1 ]; then
		grep -q "^n2: not checked: rank 0 could not listen on MASTER_PORT $port" "$out" ||
			fail "n2 not reported 'not checked'" || return 1
		awk -v s="$CK_S" 'BEGIN { exit !(s < 10 + 5) }' ||
			fail "the step took ${CK_S}s, DPG_TIMEOUT=10" || return 1
	fi
}

c_check_absent() { # n3's tasks never start dpg-check: named within DPG_TIMEOUT
	local out=$WORK/check-absent.out
	# shellcheck disable=SC2016
	CK_PRE=(sh -c 'if [ "$SLURMD_NODENAME" = n3 ]; then exec sleep 60; fi; exec "$0" "$@"')
	CK_TIMEOUT=8 check_run "$out" -K "${CKG[@]}"
	[ "$CK_RC" != 0 ] || fail "dpg-check exited 0 with n3 absent" || return 1
	check_rows "$out" "n1=ok n2=ok n3=FAIL" || return 1
	grep -q "^n3: 0 of 2 tasks reported within 4 s (DPG_TIMEOUT/2)" "$out" ||
		fail "n3 not named" || return 1
	awk -v s="$CK_S" 'BEGIN { exit !(s < 8 + 4) }' ||
		fail "the step took ${CK_S}s, DPG_TIMEOUT=8" || return 1
	note "n3 named after ${CK_S}s (DPG_TIMEOUT=8)"
	# --json: n3 not fit, every cell of it "unknown", the reason in "missing"
	CK_TIMEOUT=8 CK_ARGS=--json check_run "$out.json" -K "${CKG[@]}"
	CK_PRE=()
	[ "$CK_RC" != 0 ] || fail "dpg-check --json exited 0 with n3 absent" || return 1
	"$PY" - "$out.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["fit"] is False, d
n1, n2, n3 = d["nodes"]
assert n1["fit"] is True and n2["fit"] is True, d
assert n3["node"] == "n3" and n3["fit"] is False and n3["tasks"] == 0 and n3["expected"] == 2, n3
assert n3["missing"].startswith("0 of 2 tasks reported within 4 s (DPG_TIMEOUT/2)"), n3["missing"]
assert {x["state"] for x in n3["checks"].values()} == {"unknown"}, n3["checks"]
assert len(n3["checks"]) == 10, sorted(n3["checks"])
print("json: n3 fit false, tasks 0/2, all %d checks unknown: %s" % (len(n3["checks"]), n3["missing"][:60]))
PYEOF
}

# The report lines of the real trainer: DPG_REPORT=100 over 400 steps gives
# 4 lines, each naming a rank with the node it ran on (block distribution:
# ranks 2r and 2r+1 on n(r+1)).  Which rank is slowest here is noise: the 6
# ranks are alike.
c_report_train() {
	local out=$WORK/report-train.out all bad
	echo "\$ srun -N3 --ntasks-per-node=2 env DPG_REPORT=100 train --steps 400 ..."
	timeout 120 srun "${INALLOC[@]}" "${CKG[@]}" env DPG_REPORT=100 \
		"$E2E_TRAIN" --steps 400 --global-batch 48 --log-every 100 >"$out" 2>&1 ||
		{ show "$out"; fail "train exited non-zero"; return 1; }
	grep '^dpg report' "$out"
	all=$(grep -c '^dpg report: steps [0-9]*-[0-9]*: slowest rank [0-5] (n[1-3]): the others waited [0-9.]* ms per step for it, [0-9]*% of a [0-9.]* ms step$' "$out")
	[ "$all" = 4 ] || fail "want 4 report lines (every 100 of 400 steps), got $all" || return 1
	bad=$(sed -n 's/^dpg report: steps \([0-9]*-[0-9]*\): slowest rank \([0-9]\) (n\([0-9]\)).*/\1 \2 \3/p' "$out" |
		awk '$3 != int($2 / 2) + 1 { print "steps " $1 ": rank " $2 " on n" $3 }')
	[ -z "$bad" ] || fail "a report line names the wrong node: $bad" || return 1
	grep -q '^dpg report: steps 301-400:' "$out" || fail "no line for steps 301-400" || return 1
	note "$(grep -m1 '^dpg report' "$out")"
}

# The straggler line: rank 3 (on n2) computes 10 ms longer than the others
# before every allreduce (coll_victim, DPG_E2E_SLOW_US), so the others wait
# about 10 ms a step for it; every one of rank 0's DPG_REPORT lines must name
# it, with its node, and a wait of at least half that.  (A rank made slow by
# nice 19 or SIGSTOP is not a reliable straggler on 2 shared cores: it loses
# its time mostly while waiting inside the collectives, and the report named
# other ranks in some windows.)
c_report_straggler() {
	local out=$WORK/report.out n all
	echo "\$ srun -N3 --ntasks-per-node=2 env DPG_REPORT=20 DPG_E2E_SLOW_RANK=3 DPG_E2E_SLOW_US=10000 coll_victim   (80 steps)"
	timeout 120 srun "${INALLOC[@]}" "${CKG[@]}" env DPG_REPORT=20 DPG_E2E_ITERS=80 \
		DPG_E2E_COUNT=4096 DPG_E2E_SLOW_RANK=3 DPG_E2E_SLOW_US=10000 \
		"$E2E_VICTIM" >"$out" 2>&1 ||
		{ show "$out"; fail "coll_victim exited non-zero"; return 1; }
	grep '^dpg report' "$out"
	[ "$(grep -c '^E2E-OK' "$out")" = 6 ] || { show "$out"; fail "not all 6 ranks passed"; return 1; }
	all=$(grep -c '^dpg report: steps [0-9]*-[0-9]*: slowest rank [0-9]* (n[0-9]*)' "$out")
	[ "$all" = 4 ] || fail "want 4 report lines (every 20 of 80 steps), got $all" || return 1
	n=$(awk '/^dpg report: steps [0-9]+-[0-9]+: slowest rank 3 \(n2\): the others waited [0-9.]+ ms per step for it, [0-9]+% of a [0-9.]+ ms step$/ {
		for (i = 1; i <= NF; i++) if ($i == "waited" && $(i + 1) + 0 >= 5) c++ } END { print c + 0 }' "$out")
	[ "$n" = 4 ] || fail "rank 3 (n2) named with a wait >= 5 ms in $n of 4 report lines" || return 1
	note "$(grep -m1 'slowest rank 3' "$out")"
}

# The hang report: rank 3 stopped for good after 1 s, DPG_TIMEOUT=5: the
# ranks that time out say what every rank was doing and name rank 3 and n2;
# the step ends (fast fail ends the stopped rank too).
c_report_hang() {
	local out=$WORK/hang.out t0 s
	echo "\$ srun -N3 --ntasks-per-node=2 env DPG_TIMEOUT=5 train --steps 100000 ...   (rank 3 stopped at 1 s)"
	t0=$(e2e_now)
	timeout 120 srun "${INALLOC[@]}" "${CKG[@]}" env DPG_TIMEOUT=5 sh -c \
		'if [ "$RANK" = 3 ]; then me=$$; (sleep 1; kill -STOP $me) & fi; exec "$0" "$@"' \
		"$E2E_TRAIN" --steps 100000 --global-batch 48 --log-every 100000 >"$out" 2>&1 &&
		{ show "$out"; fail "the step succeeded"; return 1; }
	s=$(e2e_elapsed "$t0")
	grep -E 'timed out|the ranks' "$out" | head -3 | cut -c1-400
	grep -qE 'timed out .*waiting for peer rank 3 .*; the ranks: .*rank 3 \(n2[^)]*\)' "$out" ||
		fail "no hang report naming rank 3 (n2)" || return 1
	grep -qE 'ranks [0-9,-]+ waiting since [0-9.]+ s' "$out" || fail "the report does not say who waits since when" || return 1
	awk -v s="$s" 'BEGIN { exit !(s < 30) }' || fail "the step took ${s}s to end (DPG_TIMEOUT=5)" || return 1
	note "ended after ${s}s: $(grep -m1 -oE 'rank 3 \(n2[^;]*' "$out")"
}

check_cases() {
	if [ -z "${E2E_CHECK:-}" ]; then
		skip_case "dpg-check cases" "dpg-check not built"
		return 0
	fi
	pcase "dpg-check -N3 x2: healthy cluster, exit 0, 3 rows ok, --json fit" c_check_ok
	if command -v prlimit >/dev/null; then
		pcase "dpg-check: n3's slurmd at 80 open files (--propagate=NONE): only n3 fails, nofile" c_check_nofile
	else
		skip_case "dpg-check: low open-files limit" "no prlimit (util-linux)"
	fi
	if [ "$NETNS" = 1 ]; then
		pcase "dpg-check: a 1 MiB /dev/shm in n2's mount namespace: only n2 fails, shm" c_check_shm
		pcase "dpg-check: MASTER_PORT held on n2: only n2 fails, port" \
			c_check_port n2 "n1=ok n2=FAIL n3=ok"
	else
		skip_case "dpg-check: small /dev/shm on one node" "the nodes share one mount namespace (run check-e2e-netns)"
		skip_case "dpg-check: MASTER_PORT held on n2 only" "the nodes share one network namespace (run check-e2e-netns)"
	fi
	pcase "dpg-check: MASTER_PORT held on rank 0's node: n1 fails, the others 'not checked', within DPG_TIMEOUT" \
		c_check_port n1 "n1=FAIL n2=FAIL n3=FAIL"
	pcase "dpg-check: n3's tasks never start: n3 named by rank 0 within DPG_TIMEOUT" c_check_absent
	if [ -n "$E2E_TRAIN" ]; then
		pcase "report: train, DPG_REPORT=100 over 400 steps: 4 lines, each rank named with its node" c_report_train
	fi
	if [ -n "$E2E_VICTIM" ]; then
		pcase "report: DPG_REPORT=20, rank 3 computes 10 ms longer each step: every line names rank 3 (n2)" c_report_straggler
	fi
	if [ -n "$E2E_TRAIN" ]; then
		pcase "report: rank 3 SIGSTOPped, DPG_TIMEOUT=5: the hang report names rank 3 (n2), step ends" c_report_hang
	fi
}
