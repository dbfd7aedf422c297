#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tests/plan/run.sh - golden binding plans: for each hwloc fixture in
# tests/fixtures/topo and each task shape (tasks per node x GPUs per task),
# `dpg-plan --topology FIXTURE --json` must print exactly
# tests/plan/<fixture>.<T>x<G>.json (one JSON member per line, for diffs).
#
#   run.sh            compare (make check runs this), a unified diff per mismatch
#   run.sh --update   regenerate the golden files after a deliberate change
#
# Environment: DPG_PLAN (the built dpg-plan, default ./dpg-plan) and
# DPG_SRCDIR (the source tree, default: two levels above this script).
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${DPG_SRCDIR:-$(cd "$here/../.." && pwd)}
plan=${DPG_PLAN:-./dpg-plan}
golden=$src/tests/plan
fixtures=$src/tests/fixtures/topo
# the shapes tried by --update; a shape a fixture cannot place is skipped
SHAPES="1x8 2x4 4x2 8x1 1x4 2x2 4x1 1x2 2x1 1x1 2x0 4x0"
update=0
[ "${1:-}" = --update ] && update=1

[ -x "$plan" ] || { echo "FAIL: dpg-plan not found at $plan (set DPG_PLAN)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# one plan, its JSON members one per line; hermetic: no inherited variables
render() { # FIXTURE T G
	env -i PATH=/usr/bin:/bin "$plan" --nodelist n1 --ntasks "$2" \
		--topology "$1" --gpus-per-task "$3" --json 2>&1 |
		sed -e 's/,"/,\n"/g' -e 's/\[{/[\n{/g'
}

fail=0 n=0
for xml in "$fixtures"/*.xml; do
	fx=$(basename "$xml" .xml)
	if [ $update = 1 ]; then
		rm -f "$golden/$fx".*.json
		for shape in $SHAPES; do
			t=${shape%x*} g=${shape#*x}
			if env -i PATH=/usr/bin:/bin "$plan" --nodelist n1 --ntasks "$t" \
				--topology "$xml" --gpus-per-task "$g" --json >/dev/null 2>&1; then
				render "$xml" "$t" "$g" >"$golden/$fx.$shape.json"
				echo "wrote tests/plan/$fx.$shape.json"
			fi
		done
		continue
	fi
	found=0
	for gold in "$golden/$fx".*.json; do
		[ -e "$gold" ] || continue
		found=1 n=$((n + 1))
		shape=${gold#"$golden/$fx."}
		shape=${shape%.json}
		t=${shape%x*} g=${shape#*x}
		render "$xml" "$t" "$g" >"$tmp/out.json"
		if ! cmp -s "$gold" "$tmp/out.json"; then
			echo "FAIL: $fx $shape: dpg-plan's plan differs from tests/plan/$fx.$shape.json" \
				"(run tests/plan/run.sh --update if the change is deliberate):"
			diff -u "$gold" "$tmp/out.json" | sed 's/^/    /'
			fail=1
		fi
	done
	if [ $found = 0 ]; then
		echo "FAIL: $fx: no golden plan in tests/plan (run tests/plan/run.sh --update)"
		fail=1
	fi
done
[ $update = 1 ] && exit 0
[ $fail = 0 ] && echo "ok: $n golden plans match"
exit $fail
