# SPDX-License-Identifier: BSD-3-Clause
# clients.sh - the e2e cases of the Python clients people run today (PyTorch
# 2.x DDP, FSDP2 + DCP, Lightning, Accelerate, JAX, a torchrun-style reader)
# through real srun with nothing but the plugin's variables.  Sourced by
# run.sh (it defines the cases; run.sh runs them); PYENV is the python of
# the environment scripts/pyenv.sh builds.  Every case asserts results, not
# exit codes alone.

# pysrun OUT NAME ARGS...: srun -N3 --ntasks-per-node=2 (or ARGS' own
# geometry) of the environment's python in the allocation, under timeout
pysrun() {
	local out=$1 rc
	shift
	echo "\$ srun $* (python: $PYENV)"
	timeout 300 srun --jobid="$ALLOC" --overlap "$@" >"$out" 2>&1; rc=$?
	show "$out"
	[ $rc = 0 ] || fail "srun exited $rc" || return 1
}
PYG=(-N3 --ntasks-per-node=2 --dpg-gpus-per-task=0)

# count_eq FILE REGEX N WHAT: exactly N lines match
count_eq() {
	local got
	got=$(grep -c -- "$2" "$1")
	[ "$got" = "$3" ] || fail "want $3 $4 lines ($2), got $got"
}

c_py_ddp() {
	local out=$WORK/py-ddp.out first last
	pysrun "$out" "${PYG[@]}" "$PYENV" "$E2E_SRCDIR/examples/torch_ddp.py" || return 1
	count_eq "$out" '^rank [0-5]/6 .* weights in sync: True$' 6 "'weights in sync: True'" || return 1
	first=$(sed -n 's/^step  10  mean loss //p' "$out"); last=$(sed -n 's/^step  40  mean loss //p' "$out")
	awk -v a="$first" -v b="$last" 'BEGIN { exit !(a != "" && b != "" && b < a) }' ||
		fail "loss did not decrease: step 10 $first, step 40 $last" || return 1
	note "torch $("$PYENV" -c 'import torch; print(torch.__version__)') DDP gloo: 6 ranks in sync, loss $first -> $last"
}

c_py_fsdp() {
	local a=$WORK/py-fsdp-a.out b=$WORK/py-fsdp-b.out ck=$WORK/dcp
	rm -rf "$ck"
	pysrun "$a" "${PYG[@]}" --export=ALL,PYTHONFAULTHANDLER=1 "$PYENV" "$E2E_SRCDIR/examples/fsdp_train.py" \
		--steps 30 --ckpt "$ck" --save-at 15 || return 1
	grep -q '^mode fsdp2 (fully_shard) on cpu, world size 6$' "$a" || fail "not FSDP2 on 6 ranks" || return 1
	count_eq "$a" '^rank [0-5]/6: holds [0-9]* of [0-9]* parameter elements$' 6 "parameter" || return 1
	# every rank holds about 1/6 of the model (padding: at most 1 row per layer more)
	awk '/holds [0-9]+ of/ { n++; s += $4; t = $6; if ($4 > t / 6 * 1.05 + 300) bad = bad " " $0 }
	     END { if (n != 6 || s < t || bad != "") { print "shards: n=" n " sum=" s " total=" t bad; exit 1 } }' "$a" ||
		fail "per-rank parameters are not ~1/6 of the model" || return 1
	grep -q '^saved step 15 to .* on 6 ranks$' "$a" || fail "no DCP save at step 15" || return 1
	pysrun "$b" -N2 --ntasks-per-node=2 --dpg-gpus-per-task=0 "$PYENV" \
		"$E2E_SRCDIR/examples/fsdp_train.py" --steps 30 --ckpt "$ck" --resume || return 1
	grep -q '^resumed from .* at step 15 on 4 ranks$' "$b" || fail "no resume at step 15 on 4 ranks" || return 1
	# steps 16..30 at 4 ranks continue the 6-rank curve (same global batches)
	awk 'FNR == NR { if ($1 == "step") a[$2] = $4; next }
	     $1 == "step" { n++; d = $4 - a[$2]; d = d < 0 ? -d : d; r = d / (a[$2] > 0 ? a[$2] : 1);
	                    if (r > m) m = r; if (!($2 in a) || $2 <= 15) bad = 1 }
	     END { printf "NOTE: resumed at 4 ranks: %d steps, max relative loss difference %.2g\n", n, m;
	           exit !(n == 15 && !bad && m < 1e-4) }' "$a" "$b" ||
		fail "the 4-rank run does not continue the 6-rank loss curve (steps 16-30)" || return 1
	note "$(grep -m1 'holds' "$a"); DCP 6 -> 4 ranks"
}

c_py_lightning() {
	local out=$WORK/py-lightning.out
	pysrun "$out" "${PYG[@]}" "$PYENV" "$E2E_SRCDIR/examples/lightning_train.py" || return 1
	count_eq "$out" '^rank [0-5]/6 on .* weights in sync: True$' 6 "'weights in sync: True'" || return 1
	count_eq "$out" '^rank [0-5]/6: SLURMEnvironment master ' 6 "SLURMEnvironment" || return 1
	# Lightning used dpg's address and port, not its own job-id rule
	awk '/SLURMEnvironment master/ { m = $5; d = $7; sub(/\)$/, "", d); if (m != d) bad = bad " " m "!=" d }
	     END { if (bad != "") { print "mismatch:" bad; exit 1 } }' "$out" ||
		fail "Lightning's MASTER_ADDR:PORT differs from dpg's" || return 1
	note "lightning $("$PYENV" -c 'import lightning; print(lightning.__version__)'): $(grep -m1 'SLURMEnvironment' "$out" | cut -d' ' -f3-)"
}

c_py_accelerate() {
	local out=$WORK/py-accelerate.out
	pysrun "$out" "${PYG[@]}" "$PYENV" "$E2E_SRCDIR/examples/accelerate_train.py" || return 1
	count_eq "$out" '^process [0-5]/6 (DistributedType.MULTI_CPU, .*weights in sync: True$' 6 "in-sync MULTI_CPU" || return 1
	awk '/^process/ { split($0, x, "loss "); split(x[2], y, " "); if (!(y[3] + 0 < y[1] + 0)) bad = 1 }
	     END { exit bad }' "$out" || fail "loss did not decrease" || return 1
	note "accelerate $("$PYENV" -c 'import accelerate; print(accelerate.__version__)'): $(grep -m1 '^process 0/6' "$out" | sed 's/.*: loss/loss/')"
}

c_py_jax() {
	local out=$WORK/py-jax.out
	pysrun "$out" "${PYG[@]}" "$PYENV" "$E2E_SRCDIR/examples/jax_train.py" || return 1
	count_eq "$out" '^process [0-5]/6 on .* sum 21 loss .* weights agree: True$' 6 "'sum 21 ... weights agree'" || return 1
	# the coordinator is dpg's MASTER_ADDR:MASTER_PORT, not JAX's job-id port
	awk '/^process [0-9]/ { c = $6; d = $8; sub(/\)$/, "", d); if (c != d) bad = bad " " c "!=" d }
	     END { if (bad != "") { print "coordinator mismatch:" bad; exit 1 } }' "$out" ||
		fail "JAX's coordinator is not dpg's MASTER_ADDR:MASTER_PORT" || return 1
	note "$(grep -m1 '^jax ' "$out")"
}

c_py_torchrun_env() {
	local out=$WORK/py-torchrun.out
	pysrun "$out" "${PYG[@]}" --export=ALL,TORCHELASTIC_RUN_ID=outer,TORCHELASTIC_RESTART_COUNT=2,TORCHELASTIC_ERROR_FILE=/tmp/x.json \
		"$PYENV" "$E2E_DIR/torchrun_env.py" || return 1
	count_eq "$out" '^torchrun-env rank [0-5]/6: ok$' 6 "'torchrun-env ... ok'"
}

clients_cases() {
	if [ -z "$PYENV" ] || ! [ -x "$PYENV" ]; then
		skip_case "PyPI clients (torch 2.x DDP/FSDP2+DCP, Lightning, Accelerate, JAX)" \
			"no test environment: set DPG_PYENV=\$(scripts/pyenv.sh) (scripts/test.sh does)"
		return 0
	fi
	pcase "torch 2.x DDP (gloo, env://) -N3 x2: weights identical, loss decreasing" c_py_ddp
	pcase "torch 2.x FSDP2: 1/6 of the parameters per rank, DCP saved by 6 ranks resumed by 4 on the same curve" c_py_fsdp
	pcase "Lightning Trainer (DDP, CPU) by srun: 6 ranks, SLURMEnvironment on dpg's MASTER_ADDR:PORT" c_py_lightning
	pcase "Accelerate Accelerator() by srun (no accelerate launch): 6 processes, gradients synchronized" c_py_accelerate
	pcase "JAX jax.distributed.initialize() without arguments: 6 processes, dpg's port, cross-process sum" c_py_jax
	pcase "torchrun-style reader: GROUP_RANK, ROLE_RANK, LOCAL_WORLD_SIZE consistent; stale TORCHELASTIC_* gone" c_py_torchrun_env
}
